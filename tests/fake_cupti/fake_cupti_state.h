// The fake libcupti's state and helpers, shared by its two halves: the CUPTI API subset
// (fake_cupti.cc) and the control API the tests call (fake_cupti_control.cc). Test-only.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../csrc/cupti/cupti_abi.h"

namespace fake_cupti {

using namespace stallscope::cupti;

inline std::mutex mu;  // everything below
inline BufferRequestFn g_request = nullptr;
inline BufferCompleteFn g_complete = nullptr;
inline TimestampFn g_ts = nullptr;
inline std::set<int32_t> g_kinds;
inline std::set<uint32_t> g_runtime_cbids, g_driver_cbids;
inline std::map<std::thread::id, std::vector<uint64_t>> g_ext_stacks[6];  // by external kind
inline std::set<std::string> g_names;  // kernel / marker name storage (CUPTI owns the strings)
inline uint32_t g_next_corr = 1;
inline uint32_t g_next_marker = 1;
inline uint64_t g_dropped = 0;
inline bool g_other_subscriber = false;
inline bool g_subscribed = false;
inline bool g_enable_before_ts =
    false;  // an activity kind was enabled before the timestamp callback
inline std::map<std::string, int> g_fail;           // function name -> forced result
inline std::map<uint32_t, uint64_t> g_stream_free;  // stream -> when its last activity ends
inline uint64_t g_finalized = 0, g_flush_calls = 0, g_forced_flushes = 0, g_declined = 0,
                g_delivered = 0, g_flush_period = 0, g_device_buffer_size = 0;

struct Buf {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
};
inline Buf g_host, g_device;     // buffers being filled
inline std::deque<Buf> g_ready;  // full buffers, waiting for the worker

// worker
inline std::thread g_worker;
inline std::condition_variable g_cv, g_done_cv;
inline bool g_worker_stop = false;
inline uint64_t g_inflight = 0;  // buffers handed to the worker, not yet completed

int fail_code(const char* fn);
uint64_t now_locked();
size_t record_size(int32_t kind);
void ensure_worker_locked();
void hand_over_locked(Buf* b);
// Space for one record of n bytes in buffer b, asking the tool for a buffer when needed;
// nullptr when the tool declined (the record is dropped and counted, as CUPTI does).
uint8_t* reserve_locked(Buf* b, size_t n);
const char* keep(const char* s);
// The thread id CUPTI writes into API, marker and overhead records on Linux.
uint32_t tid();
// The host side of a CUDA call: correlation id, external records, API record.
// Returns the correlation id and the call's end time in *api_end.
uint32_t api_call_locked(bool driver, uint32_t cbid, uint64_t api_ns, uint64_t* api_end);
// When GPU work launched at `ready` on `stream` runs: after the stream's previous work.
uint64_t schedule_locked(uint32_t stream, uint64_t ready, uint64_t duration, uint64_t* end);

template <typename T>
T* put_locked(Buf* b, int32_t kind) {
  auto* r = reinterpret_cast<T*>(reserve_locked(b, sizeof(T)));
  if (r != nullptr) r->kind = kind;
  return r;
}

// A CUDA call that queues GPU work: its host side (api_call_locked: correlation id, external
// records, API record; the correlation id in *corr, its end in *api_end when asked), then, when
// `kind` is enabled, a record T in the device buffer running `duration` ns on `stream` of
// `device`, at least `delay` ns after the call returned and after the stream's earlier work
// (start, end, stream, correlation, device and its context set). nullptr when the kind is off or
// the tool declined a buffer.
template <typename T>
T* gpu_work_locked(int32_t kind, bool driver, uint32_t cbid, uint64_t api_ns, uint32_t device,
                   uint32_t stream, uint64_t delay, uint64_t duration, uint32_t* corr,
                   uint64_t* api_end = nullptr) {
  uint64_t called_end = 0;
  *corr = api_call_locked(driver, cbid, api_ns, &called_end);
  if (api_end != nullptr) *api_end = called_end;
  if (!g_kinds.count(kind)) return nullptr;
  uint64_t end = 0;
  const uint64_t start = schedule_locked(stream, called_end + delay, duration, &end);
  T* r = put_locked<T>(&g_device, kind);
  if (r == nullptr) return nullptr;
  r->start = start;
  r->end = end;
  r->stream_id = stream;
  r->correlation_id = *corr;
  r->device_id = device;
  r->context_id = 1 + device;
  return r;
}

}  // namespace fake_cupti
