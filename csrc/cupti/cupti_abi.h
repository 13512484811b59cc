// stallscope's own declarations of the subset of the CUPTI Activity API it uses (CUDA 12.x/13.x,
// Linux x86_64 / aarch64). Written from the documented API: enum values, function signatures and
// record field order (every record is packed with 8-byte alignment). No NVIDIA header is included.
//
// Records are read through the prefix of each versioned struct that stallscope needs: CUPTI only
// appends fields to newer versions (Kernel10 -> Kernel13), so a newer record read through an
// older prefix is safe. Offsets are pinned by static_asserts below.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stallscope::cupti {

using CUptiResult = int;  // CUPTI's result enum; values below
inline constexpr CUptiResult kSuccess = 0;
inline constexpr CUptiResult kErrInvalidParameter = 1;
inline constexpr CUptiResult kErrMaxLimitReached = 12;  // no more records in the buffer
inline constexpr CUptiResult kErrNotInitialized = 15;
inline constexpr CUptiResult kErrQueueEmpty = 18;
inline constexpr CUptiResult kErrInvalidKind = 21;  // incomplete or invalid record: stop iterating
inline constexpr CUptiResult kErrNotSupported = 27;
inline constexpr CUptiResult kErrInsufficientPrivileges = 35;
inline constexpr CUptiResult kErrMultipleSubscribers = 39;  // another tool holds the subscriber
inline constexpr CUptiResult kErrUnknown = 999;  // also what every call returns without a driver

// Name of a CUptiResult (own table: cuptiGetResultString itself fails without a driver).
const char* result_name(CUptiResult r) noexcept;

// CUpti_ActivityKind values used here.
enum ActivityKind : int32_t {
  kActInvalid = 0,
  kActMemcpy = 1,
  kActMemset = 2,
  kActKernel = 3,  // serialises kernels: never enabled
  kActDriver = 4,
  kActRuntime = 5,
  kActConcurrentKernel = 10,
  kActMarker = 12,
  kActMarkerData = 13,
  kActOverhead = 17,
  kActMemcpy2 = 22,  // peer-to-peer copies
  kActSynchronization = 38,
  kActExternalCorrelation = 39,
};

// CUpti_ExternalCorrelationKind: CUSTOM0..2 are free for a tool.
enum ExternalKind : int32_t {
  kExtUnknown = 1,
  kExtOpenAcc = 2,
  kExtCustom0 = 3,  // stallscope: step index
  kExtCustom1 = 4,  // stallscope: region name id (innermost region)
  kExtCustom2 = 5,
};

// CUpti_ActivitySynchronizationType.
enum SyncType : int32_t {
  kSyncUnknown = 0,
  kSyncEvent = 1,
  kSyncStreamWaitEvent = 2,
  kSyncStream = 3,
  kSyncContext = 4,
};

// CUpti_ActivityFlag bits of marker records.
inline constexpr uint32_t kMarkerInstantaneous = 1u << 0;
inline constexpr uint32_t kMarkerStart = 1u << 1;
inline constexpr uint32_t kMarkerEnd = 1u << 2;
// Flag of cuptiActivityFlushAll: return every buffer, incomplete ones included.
inline constexpr uint32_t kFlushForced = 1u << 0;

// CUpti_ActivityAttribute values used here.
inline constexpr int32_t kAttrDeviceBufferSize = 0;
inline constexpr int32_t kAttrDeviceBufferPoolLimit = 2;

// CUpti_ActivityObjectKind / CUpti_ActivityObjectKindId (a 12-byte union).
inline constexpr int32_t kObjectProcess = 1;
inline constexpr int32_t kObjectThread = 2;
struct ObjectId {
  uint32_t a;  // processId (pt) or deviceId (dcs)
  uint32_t b;  // threadId (pt) or contextId (dcs)
  uint32_t c;  // streamId (dcs)
};

// CUpti_Activity: every record starts with its kind.
struct Activity {
  int32_t kind;
};

// The prefix of CUpti_ActivityKernel10 (CONCURRENT_KERNEL) up to isDeviceLaunched.
struct __attribute__((packed, aligned(8))) ActivityKernel {
  int32_t kind;
  uint8_t cache_config;
  uint8_t shared_memory_config;
  uint16_t registers_per_thread;
  int32_t partitioned_global_cache_requested;
  int32_t partitioned_global_cache_executed;
  uint64_t start;  // ns (stallscope's clock once registered); 0 = not collected
  uint64_t end;
  uint64_t completed;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  int32_t grid_x, grid_y, grid_z;
  int32_t block_x, block_y, block_z;
  int32_t static_shared_memory;
  int32_t dynamic_shared_memory;
  uint32_t local_memory_per_thread;
  uint32_t local_memory_total;
  uint32_t correlation_id;
  int64_t grid_id;
  const char* name;  // mangled; owned by CUPTI
  void* reserved0;
  uint64_t queued;
  uint64_t submitted;
  uint8_t launch_type;
  uint8_t is_shared_memory_carveout_requested;
  uint8_t shared_memory_carveout_requested;
  uint8_t padding;
  uint32_t shared_memory_executed;
  uint64_t graph_node_id;
  int32_t shmem_limit_config;
  uint32_t graph_id;
  void* access_policy_window;
  uint32_t channel_id;
  int32_t channel_type;
  uint32_t cluster_x, cluster_y, cluster_z;
  uint32_t cluster_scheduling_policy;
  uint64_t local_memory_total_v2;
  uint32_t max_potential_cluster_size;
  uint32_t max_active_clusters;
  uint8_t is_device_launched;
  uint8_t padding3[7];
};

// CUpti_ActivityMemcpy6 (MEMCPY), LP64 layout.
struct __attribute__((packed, aligned(8))) ActivityMemcpy {
  int32_t kind;
  uint8_t copy_kind;  // CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH, 10 PtoP, ...
  uint8_t src_kind;   // CUpti_ActivityMemoryKind: 1 pageable, 2 pinned, 3 device, ...
  uint8_t dst_kind;
  uint8_t flags;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint32_t runtime_correlation_id;
  uint32_t pad;
  void* reserved0;
  uint64_t graph_node_id;
  uint32_t graph_id;
  uint32_t channel_id;
  int32_t channel_type;
  uint8_t is_device_launched;
  uint8_t pad2[3];
  uint64_t copy_count;
};

// CUpti_ActivityMemcpyPtoP4 (MEMCPY2), LP64 layout.
struct __attribute__((packed, aligned(8))) ActivityMemcpyPtoP {
  int32_t kind;
  uint8_t copy_kind;
  uint8_t src_kind;
  uint8_t dst_kind;
  uint8_t flags;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t src_device_id;
  uint32_t src_context_id;
  uint32_t dst_device_id;
  uint32_t dst_context_id;
  uint32_t correlation_id;
  void* reserved0;
  uint64_t graph_node_id;
  uint32_t graph_id;
  uint32_t channel_id;
  int32_t channel_type;
  uint32_t pad_tail;
};

// CUpti_ActivityMemset4 (MEMSET), LP64 layout.
struct __attribute__((packed, aligned(8))) ActivityMemset {
  int32_t kind;
  uint32_t value;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t correlation_id;
  uint16_t flags;
  uint16_t memory_kind;
  uint32_t pad;
  void* reserved0;
  uint64_t graph_node_id;
  uint32_t graph_id;
  uint32_t channel_id;
  int32_t channel_type;
  uint8_t is_device_launched;
  uint8_t pad2[3];
};

// CUpti_ActivitySynchronization2 (SYNCHRONIZATION): a host-side wait; times are the call's.
struct __attribute__((packed, aligned(8))) ActivitySynchronization {
  int32_t kind;
  int32_t type;  // SyncType
  uint64_t start;
  uint64_t end;
  uint32_t correlation_id;
  uint32_t context_id;
  uint32_t stream_id;  // 0xffffffff for a context synchronisation
  uint32_t cuda_event_id;
  uint64_t cuda_event_sync_id;
  uint32_t return_value;
  uint32_t pad;
};

// CUpti_ActivityExternalCorrelation (EXTERNAL_CORRELATION).
struct __attribute__((packed, aligned(8))) ActivityExternalCorrelation {
  int32_t kind;
  int32_t external_kind;  // ExternalKind
  uint64_t external_id;
  uint32_t correlation_id;
  uint32_t reserved;
};

// CUpti_ActivityAPI (RUNTIME, DRIVER).
struct __attribute__((packed, aligned(8))) ActivityApi {
  int32_t kind;
  uint32_t cbid;
  uint64_t start;
  uint64_t end;
  uint32_t process_id;
  uint32_t thread_id;
  uint32_t correlation_id;
  uint32_t return_value;
};

// CUpti_ActivityMarker2 (MARKER: NVTX). A range is a START and an END record with one id.
struct __attribute__((packed, aligned(8))) ActivityMarker {
  int32_t kind;
  uint32_t flags;
  uint64_t timestamp;
  uint32_t id;
  int32_t object_kind;
  ObjectId object_id;
  uint32_t pad;
  const char* name;    // NULL on END records
  const char* domain;  // NULL for the default domain
};

// CUpti_ActivityOverhead3 (OVERHEAD).
struct __attribute__((packed, aligned(8))) ActivityOverhead {
  int32_t kind;
  int32_t overhead_kind;  // 0 unknown, 1 driver compiler, n<<16 CUPTI's own (see overhead_name)
  int32_t object_kind;
  ObjectId object_id;
  uint64_t start;
  uint64_t end;
  uint32_t correlation_id;
  uint32_t reserved0;
  void* overhead_data;
};

static_assert(offsetof(ActivityKernel, start) == 16 && offsetof(ActivityKernel, device_id) == 40 &&
              offsetof(ActivityKernel, stream_id) == 48 &&
              offsetof(ActivityKernel, correlation_id) == 92 &&
              offsetof(ActivityKernel, name) == 104 && offsetof(ActivityKernel, queued) == 120 &&
              offsetof(ActivityKernel, graph_id) == 156 &&
              offsetof(ActivityKernel, is_device_launched) == 208 && sizeof(ActivityKernel) == 216);
static_assert(offsetof(ActivityMemcpy, bytes) == 8 && offsetof(ActivityMemcpy, start) == 16 &&
              offsetof(ActivityMemcpy, device_id) == 32 &&
              offsetof(ActivityMemcpy, correlation_id) == 44 &&
              offsetof(ActivityMemcpy, reserved0) == 56 && sizeof(ActivityMemcpy) == 96);
static_assert(offsetof(ActivityMemcpyPtoP, src_device_id) == 44 &&
              offsetof(ActivityMemcpyPtoP, dst_device_id) == 52 &&
              offsetof(ActivityMemcpyPtoP, correlation_id) == 60 &&
              offsetof(ActivityMemcpyPtoP, reserved0) == 64 && sizeof(ActivityMemcpyPtoP) == 96);
static_assert(offsetof(ActivityMemset, bytes) == 8 && offsetof(ActivityMemset, device_id) == 32 &&
              offsetof(ActivityMemset, correlation_id) == 44 &&
              offsetof(ActivityMemset, reserved0) == 56 && sizeof(ActivityMemset) == 88);
static_assert(offsetof(ActivitySynchronization, start) == 8 &&
              offsetof(ActivitySynchronization, correlation_id) == 24 &&
              offsetof(ActivitySynchronization, stream_id) == 32 &&
              sizeof(ActivitySynchronization) == 56);
static_assert(offsetof(ActivityExternalCorrelation, external_id) == 8 &&
              offsetof(ActivityExternalCorrelation, correlation_id) == 16 &&
              sizeof(ActivityExternalCorrelation) == 24);
static_assert(offsetof(ActivityApi, start) == 8 && offsetof(ActivityApi, thread_id) == 28 &&
              offsetof(ActivityApi, correlation_id) == 32 && sizeof(ActivityApi) == 40);
static_assert(offsetof(ActivityMarker, timestamp) == 8 && offsetof(ActivityMarker, id) == 16 &&
              offsetof(ActivityMarker, object_id) == 24 && offsetof(ActivityMarker, name) == 40 &&
              offsetof(ActivityMarker, domain) == 48 && sizeof(ActivityMarker) == 56);
static_assert(offsetof(ActivityOverhead, object_id) == 12 &&
              offsetof(ActivityOverhead, start) == 24 &&
              offsetof(ActivityOverhead, correlation_id) == 40 && sizeof(ActivityOverhead) == 56);

// Callback types.
using BufferRequestFn = void (*)(uint8_t** buffer, size_t* size, size_t* max_num_records);
using BufferCompleteFn = void (*)(void* ctx, uint32_t stream_id, uint8_t* buffer, size_t size,
                                  size_t valid_size);
using TimestampFn = uint64_t (*)();
using CallbackFn = void (*)(void* userdata, int domain, uint32_t cbid, const void* cbdata);

// The entry points, resolved with dlsym (C linkage, default calling convention on Linux).
struct Api {  // entries marked optional may be null
  CUptiResult (*GetVersion)(uint32_t* version);
  CUptiResult (*GetTimestamp)(uint64_t* ts);
  CUptiResult (*ActivityEnable)(int32_t kind);
  CUptiResult (*ActivityDisable)(int32_t kind);
  CUptiResult (*ActivityEnableRuntimeApi)(uint32_t cbid, uint8_t enable);
  CUptiResult (*ActivityEnableDriverApi)(uint32_t cbid, uint8_t enable);  // optional
  CUptiResult (*ActivityRegisterCallbacks)(BufferRequestFn request, BufferCompleteFn complete);
  CUptiResult (*ActivityRegisterTimestampCallback)(TimestampFn fn);
  CUptiResult (*ActivityGetNextRecord)(uint8_t* buffer, size_t valid_size, Activity** record);
  CUptiResult (*ActivityGetNumDroppedRecords)(void* ctx, uint32_t stream_id, size_t* dropped);
  CUptiResult (*ActivityFlushAll)(uint32_t flag);
  CUptiResult (*ActivityFlushPeriod)(uint32_t period_ms);                              // optional
  CUptiResult (*ActivitySetAttribute)(int32_t attr, size_t* value_size, void* value);  // optional
  CUptiResult (*ActivityPushExternalCorrelationId)(int32_t kind, uint64_t id);
  CUptiResult (*ActivityPopExternalCorrelationId)(int32_t kind, uint64_t* last_id);
  CUptiResult (*Subscribe)(void** subscriber, CallbackFn callback, void* userdata);  // optional
  CUptiResult (*Unsubscribe)(void* subscriber);                                      // optional
  CUptiResult (*Finalize)();
};

}  // namespace stallscope::cupti
