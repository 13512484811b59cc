// stallscope's own declarations of the NCCL profiler plugin ABI, versions 4 to 7, written from the
// documented facts (NCCL's plugin documentation and release notes: function tables, descriptor
// fields in order, event type bits, state values). Only what a profiler plugin sees is declared.
//
// NCCL dlopens the plugin and looks up the newest table symbol it knows (ncclProfiler_v7 ...
// ncclProfiler_v1); a plugin exports one table per version it supports. All calls return an
// ncclResult_t (0 = success); only init may fail, which disables the plugin for that communicator.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// ncclResult_t values a profiler returns.
typedef enum {
  ssNcclSuccess = 0,
  ssNcclSystemError = 2,
  ssNcclInternalError = 3,
  ssNcclInvalidArgument = 4,
} ss_nccl_result_t;

// ncclDebugLogger_t: level, subsystem flags, file, line, printf format.
typedef void (*ss_nccl_logger_t)(int level, unsigned long flags, const char* file, int line,
                                 const char* fmt, ...);

// Event type bits: the activation mask set by init, and the descriptor's `type`.
enum {
  ssNcclProfileGroup = 1 << 0,          // ncclGroupStart/End around one or more operations
  ssNcclProfileColl = 1 << 1,           // one collective (stop = enqueued, not finished)
  ssNcclProfileP2p = 1 << 2,            // one send or recv
  ssNcclProfileProxyOp = 1 << 3,        // network proxy work of one channel for one operation
  ssNcclProfileProxyStep = 1 << 4,      // one step of a proxy op
  ssNcclProfileProxyCtrl = 1 << 5,      // proxy thread activity
  ssNcclProfileKernelCh = 1 << 6,       // one channel of the kernel (GPU globaltimer, v4+)
  ssNcclProfileNetPlugin = 1 << 7,      // network-plugin defined
  ssNcclProfileGroupApi = 1 << 8,       // v5: the ncclGroupStart/End API calls
  ssNcclProfileCollApi = 1 << 9,        // v5: the collective API call
  ssNcclProfileP2pApi = 1 << 10,        // v5: the send/recv API call
  ssNcclProfileKernelLaunch = 1 << 11,  // v5: the kernel launch
  ssNcclProfileCeColl = 1 << 12,        // v6: copy-engine collective
  ssNcclProfileCeSync = 1 << 13,        // v6
  ssNcclProfileCeBatch = 1 << 14,       // v6
  ssNcclProfileKernelPhase = 1 << 15,   // v7: kernel barrier phase
};

// ncclProfilerEventState_t (one enum for every version; values are stable).
typedef enum {
  ssNcclProxyOpSendPosted = 0,
  ssNcclProxyOpSendRemFifoWait = 1,
  ssNcclProxyOpSendTransmitted = 2,
  ssNcclProxyOpSendDone = 3,
  ssNcclProxyOpRecvPosted = 4,
  ssNcclProxyOpRecvReceived = 5,
  ssNcclProxyOpRecvTransmitted = 6,
  ssNcclProxyOpRecvDone = 7,
  ssNcclProxyStepSendGPUWait = 8,
  ssNcclProxyStepSendWait = 9,
  ssNcclProxyStepRecvWait = 10,
  ssNcclProxyStepRecvFlushWait = 11,
  ssNcclProxyStepRecvGPUWait = 12,
  ssNcclProxyCtrlIdle = 13,
  ssNcclProxyCtrlActive = 14,
  ssNcclProxyCtrlSleep = 15,
  ssNcclProxyCtrlWakeup = 16,
  ssNcclProxyCtrlAppend = 17,
  ssNcclProxyCtrlAppendEnd = 18,
  ssNcclProxyOpInProgress = 19,      // v4
  ssNcclProxyStepSendPeerWait = 20,  // v4
  ssNcclNetPluginUpdate = 21,
  ssNcclKernelChStop = 22,     // args->kernelCh.pTimer = GPU globaltimer at channel end
  ssNcclGroupApiState23 = 23,  // v5 group API states
  ssNcclGroupApiState24 = 24,
  ssNcclCeCollStart = 25,  // v6 copy-engine states
  ssNcclCeCollComplete = 26,
  ssNcclCeSyncStart = 27,
  ssNcclCeSyncComplete = 28,
  ssNcclCeBatchStart = 29,
  ssNcclCeBatchComplete = 30,
} ss_nccl_state_t;

// --- descriptor members shared by several versions --------------------------------------------
typedef struct {
  pid_t pid;          // process that issued the op
  uint8_t channelId;  // channel
  int peer;           // remote rank
  int nSteps;         // steps of this op
  int chunkSize;      // bytes per step
  int isSend;
} ss_nccl_proxy_op_t;

typedef struct {
  int step;
} ss_nccl_proxy_step_t;

typedef struct {
  uint8_t channelId;
  uint64_t pTimer;  // GPU globaltimer (ns) at the channel's start
} ss_nccl_kernel_ch_t;

typedef struct {
  int64_t id;
  void* data;
} ss_nccl_net_plugin_t;

// --- v4 (NCCL 2.27.3) -------------------------------------------------------------------------
typedef struct {
  uint8_t type;     // one ssNcclProfile* bit
  void* parentObj;  // handle of the parent event (the group for a Coll, the Coll for a ProxyOp)
  int rank;         // rank in the communicator
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    ss_nccl_proxy_op_t proxyOp;
    ss_nccl_proxy_step_t proxyStep;
    ss_nccl_kernel_ch_t kernelCh;
    ss_nccl_net_plugin_t netPlugin;
  };
} ss_nccl_descr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU globaltimer (ns) at the channel's end
  } kernelCh;
} ss_nccl_state_args_t;  // v4 .. v7: the members a profiler reads sit at offset 0 in every one

typedef struct {
  const char* name;
  int (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
              int nNodes, int nranks, int rank, ss_nccl_logger_t logfn);
  int (*startEvent)(void* context, void** eHandle, ss_nccl_descr_v4_t* eDescr);
  int (*stopEvent)(void* eHandle);
  int (*recordEventState)(void* eHandle, ss_nccl_state_t eState, ss_nccl_state_args_t* eStateArgs);
  int (*finalize)(void* context);
} ss_nccl_profiler_v4_t;

// --- v5 (2.28.3), v6 (2.29.2), v7 (after 2.30.7) ----------------------------------------------
// The descriptor's type widens to 64 bits (event bits past 7); API-level events are added; Coll and
// P2p gain parentGroup (the parent object keeps v4's meaning); v6 adds copy-engine members; v7
// appends kernelVariant, isSymColl and userTag to Coll, userTag to P2p and the API events.
typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;
} ss_nccl_coll_v5_t;

typedef struct {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
} ss_nccl_p2p_v5_t;

typedef struct {
  bool graphCaptured;
  int groupDepth;
} ss_nccl_group_api_t;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
} ss_nccl_coll_api_v5_t;

typedef struct {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
} ss_nccl_p2p_api_v5_t;

typedef struct {
  void* stream;
} ss_nccl_kernel_launch_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    ss_nccl_group_api_t groupApi;
    ss_nccl_coll_api_v5_t collApi;
    ss_nccl_p2p_api_v5_t p2pApi;
    ss_nccl_kernel_launch_t kernelLaunch;
    ss_nccl_coll_v5_t coll;
    ss_nccl_p2p_v5_t p2p;
    ss_nccl_proxy_op_t proxyOp;
    ss_nccl_proxy_step_t proxyStep;
    ss_nccl_kernel_ch_t kernelCh;
    ss_nccl_net_plugin_t netPlugin;
  };
} ss_nccl_descr_v5_t;

typedef struct {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
} ss_nccl_ce_coll_v6_t;

typedef struct {
  uint8_t channelId;
  uint8_t isSend;
  uint8_t peer;
  uint32_t step;
  uint32_t size;
  uint64_t startTs;
  uint64_t readyTs;
} ss_nccl_kernel_step_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    ss_nccl_group_api_t groupApi;
    ss_nccl_coll_api_v5_t collApi;
    ss_nccl_p2p_api_v5_t p2pApi;
    ss_nccl_kernel_launch_t kernelLaunch;
    ss_nccl_coll_v5_t coll;
    ss_nccl_p2p_v5_t p2p;
    ss_nccl_proxy_op_t proxyOp;
    ss_nccl_proxy_step_t proxyStep;
    ss_nccl_kernel_ch_t kernelCh;
    ss_nccl_kernel_step_t kernelStep;
    ss_nccl_net_plugin_t netPlugin;
    ss_nccl_ce_coll_v6_t ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ss_nccl_descr_v6_t;

typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    ss_nccl_group_api_t groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    ss_nccl_kernel_launch_t kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
      const char* kernelVariant;
      bool isSymColl;
      uint64_t userTag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
      uint64_t userTag;
    } p2p;
    ss_nccl_proxy_op_t proxyOp;
    ss_nccl_proxy_step_t proxyStep;
    ss_nccl_kernel_ch_t kernelCh;
    ss_nccl_net_plugin_t netPlugin;
    struct {
      ss_nccl_ce_coll_v6_t base;
      uint64_t userTag;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
    struct {
      uint8_t channelId;
      uint8_t phaseId;  // 0 initial sync, 1 compute, 2 final sync
      const char* phaseName;
      uint64_t pTimer;
    } kernelPhase;
  };
} ss_nccl_descr_v7_t;

#define SS_NCCL_PROFILER_TABLE(DESCR)                                                        \
  struct {                                                                                   \
    const char* name;                                                                        \
    int (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, \
                int nNodes, int nranks, int rank, ss_nccl_logger_t logfn);                   \
    int (*startEvent)(void* context, void** eHandle, DESCR* eDescr);                         \
    int (*stopEvent)(void* eHandle);                                                         \
    int (*recordEventState)(void* eHandle, ss_nccl_state_t eState,                           \
                            ss_nccl_state_args_t* eStateArgs);                               \
    int (*finalize)(void* context);                                                          \
  }

typedef SS_NCCL_PROFILER_TABLE(ss_nccl_descr_v5_t) ss_nccl_profiler_v5_t;
typedef SS_NCCL_PROFILER_TABLE(ss_nccl_descr_v6_t) ss_nccl_profiler_v6_t;
typedef SS_NCCL_PROFILER_TABLE(ss_nccl_descr_v7_t) ss_nccl_profiler_v7_t;

#ifdef __cplusplus
}
#endif
