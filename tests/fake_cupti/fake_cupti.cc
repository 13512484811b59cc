// A fake libcupti for CPU tests: the subset of the CUPTI Activity API stallscope calls, emitting
// realistic records (the documented layouts, as in csrc/cupti/cupti_abi.h) through the buffer
// callbacks the tool registered, from a CUPTI-like worker thread. Tests drive it through the
// fake_cupti_* control functions (ctypes). Test-only: never shipped.
//
// Model: an "API call" (fake_cupti_launch_kernel, _memcpy, ...) runs on the calling thread like
// a CUDA call: it takes a correlation id, writes EXTERNAL_CORRELATION records for every
// external-id stack of the calling thread that is not empty, and a RUNTIME record when that call
// is enabled, into the host buffer; the GPU activity (kernel, copy, memset) goes into the device
// buffer, delivered separately (later, as on a GPU). Timestamps come from the registered
// timestamp callback, or CLOCK_REALTIME (CUPTI's default source) when none is registered.
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

using namespace stallscope::cupti;

namespace {

std::mutex mu;  // everything below
BufferRequestFn g_request = nullptr;
BufferCompleteFn g_complete = nullptr;
TimestampFn g_ts = nullptr;
std::set<int32_t> g_kinds;
std::set<uint32_t> g_runtime_cbids, g_driver_cbids;
std::map<std::thread::id, std::vector<uint64_t>> g_ext_stacks[6];  // by external kind
std::set<std::string> g_names;  // kernel / marker name storage (CUPTI owns the strings)
uint32_t g_next_corr = 1;
uint32_t g_next_marker = 1;
uint64_t g_dropped = 0;
bool g_other_subscriber = false;
bool g_subscribed = false;
bool g_enable_before_ts = false;    // an activity kind was enabled before the timestamp callback
std::map<std::string, int> g_fail;  // function name -> forced result
std::map<uint32_t, uint64_t> g_stream_free;  // stream -> when its last activity ends
uint64_t g_finalized = 0, g_flush_calls = 0, g_forced_flushes = 0, g_declined = 0, g_delivered = 0,
         g_flush_period = 0, g_device_buffer_size = 0;

struct Buf {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
};
Buf g_host, g_device;     // buffers being filled
std::deque<Buf> g_ready;  // full buffers, waiting for the worker

// worker
std::thread g_worker;
std::condition_variable g_cv, g_done_cv;
bool g_worker_stop = false;
uint64_t g_inflight = 0;  // buffers handed to the worker, not yet completed

int fail_code(const char* fn) {
  auto it = g_fail.find(fn);
  return it == g_fail.end() ? 0 : it->second;
}

uint64_t now_locked() {
  if (g_ts != nullptr) return g_ts();
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

size_t record_size(int32_t kind) {
  switch (kind) {
    case kActConcurrentKernel:
    case kActKernel:
      return sizeof(ActivityKernel);
    case kActMemcpy:
      return sizeof(ActivityMemcpy);
    case kActMemcpy2:
      return sizeof(ActivityMemcpyPtoP);
    case kActMemset:
      return sizeof(ActivityMemset);
    case kActSynchronization:
      return sizeof(ActivitySynchronization);
    case kActExternalCorrelation:
      return sizeof(ActivityExternalCorrelation);
    case kActRuntime:
    case kActDriver:
      return sizeof(ActivityApi);
    case kActMarker:
      return sizeof(ActivityMarker);
    case kActOverhead:
      return sizeof(ActivityOverhead);
    case 1000:
      return 32;  // a kind stallscope does not read (tests "unknown kind")
    default:
      return 0;
  }
}

void worker_loop() {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    g_cv.wait(lk, [] { return g_worker_stop || !g_ready.empty(); });
    if (g_ready.empty() && g_worker_stop) return;
    Buf b = g_ready.front();
    g_ready.pop_front();
    BufferCompleteFn complete = g_complete;
    lk.unlock();  // CUPTI calls the tool without its own locks held
    if (complete != nullptr) complete(nullptr, 0, b.data, b.size, b.used);
    lk.lock();
    g_delivered++;
    g_inflight--;
    g_done_cv.notify_all();
  }
}

void ensure_worker_locked() {
  if (!g_worker.joinable()) {
    g_worker_stop = false;
    g_worker = std::thread(worker_loop);
  }
}

void hand_over_locked(Buf* b) {
  if (b->data == nullptr) return;
  ensure_worker_locked();
  g_ready.push_back(*b);
  g_inflight++;
  *b = Buf{};
  g_cv.notify_all();
}

// Space for one record of n bytes in buffer b, asking the tool for a buffer when needed;
// nullptr when the tool declined (the record is dropped and counted, as CUPTI does).
uint8_t* reserve_locked(Buf* b, size_t n) {
  if (b->data != nullptr && b->used + n > b->size) hand_over_locked(b);
  if (b->data == nullptr) {
    if (g_request == nullptr) {
      g_dropped++;
      return nullptr;
    }
    uint8_t* data = nullptr;
    size_t size = 0, max_records = 0;
    g_request(&data, &size, &max_records);  // called with mu held: the tool must not call back
    if (data == nullptr || size < n) {
      g_declined++;
      g_dropped++;
      return nullptr;
    }
    b->data = data;
    b->size = size;
    b->used = 0;
  }
  uint8_t* p = b->data + b->used;
  std::memset(p, 0, n);
  b->used += n;
  return p;
}

template <typename T>
T* put_locked(Buf* b, int32_t kind) {
  auto* r = reinterpret_cast<T*>(reserve_locked(b, sizeof(T)));
  if (r != nullptr) r->kind = kind;
  return r;
}

const char* keep(const char* s) {
  return s == nullptr ? nullptr : g_names.insert(s).first->c_str();
}

// The thread id CUPTI writes into API, marker and overhead records on Linux: the low 32 bits of
// pthread_self() (what Kineto matches them with), not the kernel's thread id.
uint32_t tid() {
  const pthread_t self = pthread_self();
  uint32_t low = 0;
  std::memcpy(&low, &self, sizeof low);
  return low;
}

// The host side of a CUDA call: correlation id, external records, API record.
// Returns the correlation id and the call's end time in *api_end.
uint32_t api_call_locked(bool driver, uint32_t cbid, uint64_t api_ns, uint64_t* api_end) {
  const uint32_t corr = g_next_corr++;
  const uint64_t start = now_locked();
  const uint64_t end = start + api_ns;
  *api_end = end;
  const bool want_api = driver ? (g_kinds.count(kActDriver) || g_driver_cbids.count(cbid))
                               : (g_kinds.count(kActRuntime) || g_runtime_cbids.count(cbid));
  if (g_kinds.count(kActExternalCorrelation)) {
    for (int k = kExtUnknown; k <= kExtCustom2; ++k) {
      auto it = g_ext_stacks[k].find(std::this_thread::get_id());
      if (it == g_ext_stacks[k].end() || it->second.empty()) continue;
      auto* x = put_locked<ActivityExternalCorrelation>(&g_host, kActExternalCorrelation);
      if (x == nullptr) continue;
      x->external_kind = k;
      x->external_id = it->second.back();
      x->correlation_id = corr;
    }
  }
  if (want_api) {
    auto* a = put_locked<ActivityApi>(&g_host, driver ? kActDriver : kActRuntime);
    if (a != nullptr) {
      a->cbid = cbid;
      a->start = start;
      a->end = end;
      a->process_id = static_cast<uint32_t>(getpid());
      a->thread_id = tid();
      a->correlation_id = corr;
    }
  }
  return corr;
}

// When GPU work launched at `ready` on `stream` runs: after the stream's previous work.
uint64_t schedule_locked(uint32_t stream, uint64_t ready, uint64_t duration, uint64_t* end) {
  uint64_t& free_at = g_stream_free[stream];
  const uint64_t start = ready > free_at ? ready : free_at;
  *end = start + duration;
  free_at = *end;
  return start;
}

}  // namespace

extern "C" {

// ---- the CUPTI API subset ------------------------------------------------------------------
__attribute__((visibility("default"))) int cuptiGetVersion(uint32_t* v) {
  *v = 130001;
  return fail_code("cuptiGetVersion");
}
__attribute__((visibility("default"))) int cuptiGetTimestamp(uint64_t* t) {
  std::lock_guard<std::mutex> lk(mu);
  *t = now_locked();
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityEnable(int32_t kind) {
  std::lock_guard<std::mutex> lk(mu);
  if (int f = fail_code("cuptiActivityEnable")) return f;
  if (kind == kActKernel && fail_code("KERNEL")) return fail_code("KERNEL");
  if (g_ts == nullptr) g_enable_before_ts = true;
  if (kind == kActMarker && fail_code("MARKER")) return fail_code("MARKER");
  g_kinds.insert(kind);
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityDisable(int32_t kind) {
  std::lock_guard<std::mutex> lk(mu);
  g_kinds.erase(kind);
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityEnableRuntimeApi(uint32_t cbid,
                                                                         uint8_t on) {
  std::lock_guard<std::mutex> lk(mu);
  if (on) {
    g_runtime_cbids.insert(cbid);
  } else {
    g_runtime_cbids.erase(cbid);
  }
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t on) {
  std::lock_guard<std::mutex> lk(mu);
  if (on) {
    g_driver_cbids.insert(cbid);
  } else {
    g_driver_cbids.erase(cbid);
  }
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityRegisterCallbacks(BufferRequestFn req,
                                                                          BufferCompleteFn done) {
  std::lock_guard<std::mutex> lk(mu);
  if (int f = fail_code("cuptiActivityRegisterCallbacks")) return f;
  g_request = req;
  g_complete = done;
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityRegisterTimestampCallback(TimestampFn fn) {
  std::lock_guard<std::mutex> lk(mu);
  if (int f = fail_code("cuptiActivityRegisterTimestampCallback")) return f;
  g_ts = fn;
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityGetNextRecord(uint8_t* buf, size_t valid,
                                                                      Activity** rec) {
  if (buf == nullptr) return kErrInvalidParameter;
  size_t off = 0;
  if (*rec != nullptr) {
    off = static_cast<size_t>(reinterpret_cast<uint8_t*>(*rec) - buf) + record_size((*rec)->kind);
  }
  if (off >= valid) return kErrMaxLimitReached;
  auto* r = reinterpret_cast<Activity*>(buf + off);
  const size_t n = record_size(r->kind);
  if (n == 0 || off + n > valid) return kErrInvalidKind;
  *rec = r;
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityGetNumDroppedRecords(void*, uint32_t,
                                                                             size_t* dropped) {
  std::lock_guard<std::mutex> lk(mu);
  *dropped = g_dropped;
  g_dropped = 0;  // reset on read, as documented
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityFlushAll(uint32_t flag) {
  std::unique_lock<std::mutex> lk(mu);
  g_flush_calls++;
  if (int f = fail_code("cuptiActivityFlushAll")) return f;
  if (flag & kFlushForced) {
    g_forced_flushes++;
    hand_over_locked(&g_host);
    hand_over_locked(&g_device);
  }
  // Every handed-over buffer is completed before the flush returns.
  g_done_cv.wait(lk, [] { return g_inflight == 0; });
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityFlushPeriod(uint32_t ms) {
  std::lock_guard<std::mutex> lk(mu);
  g_flush_period = ms;
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivitySetAttribute(int32_t attr, size_t* size,
                                                                     void* value) {
  std::lock_guard<std::mutex> lk(mu);
  if (attr == kAttrDeviceBufferSize && *size == sizeof(size_t)) {
    g_device_buffer_size = *static_cast<size_t*>(value);
  }
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityPushExternalCorrelationId(int32_t kind,
                                                                                  uint64_t id) {
  std::lock_guard<std::mutex> lk(mu);
  if (kind < kExtUnknown || kind > kExtCustom2) return kErrInvalidParameter;
  g_ext_stacks[kind][std::this_thread::get_id()].push_back(id);
  return 0;
}
__attribute__((visibility("default"))) int cuptiActivityPopExternalCorrelationId(int32_t kind,
                                                                                 uint64_t* last) {
  std::lock_guard<std::mutex> lk(mu);
  if (kind < kExtUnknown || kind > kExtCustom2) return kErrInvalidParameter;
  auto& st = g_ext_stacks[kind][std::this_thread::get_id()];
  if (st.empty()) return kErrQueueEmpty;
  if (last != nullptr) *last = st.back();
  st.pop_back();
  return 0;
}
__attribute__((visibility("default"))) int cuptiSubscribe(void** h, CallbackFn, void*) {
  std::lock_guard<std::mutex> lk(mu);
  if (int f = fail_code("cuptiSubscribe")) return f;
  if (g_other_subscriber || g_subscribed) return kErrMultipleSubscribers;
  g_subscribed = true;
  *h = &g_subscribed;
  return 0;
}
__attribute__((visibility("default"))) int cuptiUnsubscribe(void*) {
  std::lock_guard<std::mutex> lk(mu);
  g_subscribed = false;
  return 0;
}
__attribute__((visibility("default"))) int cuptiFinalize() {
  std::lock_guard<std::mutex> lk(mu);
  g_finalized++;
  g_kinds.clear();
  g_runtime_cbids.clear();
  g_driver_cbids.clear();
  for (auto& m : g_ext_stacks) m.clear();
  g_request = nullptr;
  g_complete = nullptr;
  g_ts = nullptr;
  return 0;
}

// ---- control API for the tests --------------------------------------------------------------
__attribute__((visibility("default"))) void fake_cupti_reset() {
  std::unique_lock<std::mutex> lk(mu);
  g_done_cv.wait(lk, [] { return g_inflight == 0; });
  g_fail.clear();
  g_other_subscriber = false;
  g_enable_before_ts = false;
  g_dropped = 0;
  g_finalized = g_flush_calls = g_forced_flushes = g_declined = g_delivered = 0;
  g_stream_free.clear();
}
__attribute__((visibility("default"))) void fake_cupti_set_fail(const char* fn, int code) {
  std::lock_guard<std::mutex> lk(mu);
  if (code == 0) {
    g_fail.erase(fn);
  } else {
    g_fail[fn] = code;
  }
}
__attribute__((visibility("default"))) void fake_cupti_set_other_subscriber(int on) {
  std::lock_guard<std::mutex> lk(mu);
  g_other_subscriber = on != 0;
}
__attribute__((visibility("default"))) void fake_cupti_add_dropped(uint64_t n) {
  std::lock_guard<std::mutex> lk(mu);
  g_dropped += n;
}
// A kernel launch: API call of api_ns on this thread (runtime cbid 211, or driver cbid 652 when
// driver != 0), then the kernel runs duration_ns on `stream`, at least delay_ns after the call
// returned and after the stream's earlier work. Returns the correlation id.
__attribute__((visibility("default"))) uint32_t
fake_cupti_launch_kernel(const char* mangled, uint32_t device, uint32_t stream, uint64_t api_ns,
                         uint64_t delay_ns, uint64_t duration_ns, int driver) {
  std::lock_guard<std::mutex> lk(mu);
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(driver != 0, driver ? 652 : 211, api_ns, &api_end);
  if (!g_kinds.count(kActConcurrentKernel)) return corr;
  uint64_t end = 0;
  const uint64_t start = schedule_locked(stream, api_end + delay_ns, duration_ns, &end);
  auto* k = put_locked<ActivityKernel>(&g_device, kActConcurrentKernel);
  if (k == nullptr) return corr;
  k->start = start;
  k->end = end;
  k->completed = end;
  k->device_id = device;
  k->context_id = 1 + device;
  k->stream_id = stream;
  k->grid_x = 128;
  k->grid_y = k->grid_z = 1;
  k->block_x = 256;
  k->block_y = k->block_z = 1;
  k->correlation_id = corr;
  k->name = keep(mangled);
  k->queued = k->submitted = api_end;
  return corr;
}
// A kernel record without timing (CUPTI writes 0 timestamps when its device buffer was full).
__attribute__((visibility("default"))) uint32_t fake_cupti_untimed_kernel(const char* mangled,
                                                                          uint32_t stream) {
  std::lock_guard<std::mutex> lk(mu);
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(false, 211, 1000, &api_end);
  auto* k = put_locked<ActivityKernel>(&g_device, kActConcurrentKernel);
  if (k != nullptr) {
    k->stream_id = stream;
    k->correlation_id = corr;
    k->name = keep(mangled);
  }
  return corr;
}
// cudaMemcpyAsync (cbid 41) of `bytes`; copy_kind 1 HtoD, 2 DtoH, 8 DtoD.
__attribute__((visibility("default"))) uint32_t fake_cupti_memcpy(uint32_t copy_kind,
                                                                  uint32_t src_kind,
                                                                  uint32_t dst_kind, uint64_t bytes,
                                                                  uint32_t device, uint32_t stream,
                                                                  uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(false, 41, 2000, &api_end);
  if (!g_kinds.count(kActMemcpy)) return corr;
  uint64_t end = 0;
  const uint64_t start = schedule_locked(stream, api_end + 1000, duration_ns, &end);
  auto* m = put_locked<ActivityMemcpy>(&g_device, kActMemcpy);
  if (m == nullptr) return corr;
  m->copy_kind = static_cast<uint8_t>(copy_kind);
  m->src_kind = static_cast<uint8_t>(src_kind);
  m->dst_kind = static_cast<uint8_t>(dst_kind);
  m->bytes = bytes;
  m->start = start;
  m->end = end;
  m->device_id = device;
  m->context_id = 1 + device;
  m->stream_id = stream;
  m->correlation_id = corr;
  return corr;
}
// cudaMemcpyPeerAsync (cbid 161): a MEMCPY2 record.
__attribute__((visibility("default"))) uint32_t fake_cupti_memcpy_p2p(uint32_t src_device,
                                                                      uint32_t dst_device,
                                                                      uint64_t bytes,
                                                                      uint32_t stream,
                                                                      uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(false, 161, 2000, &api_end);
  if (!g_kinds.count(kActMemcpy2)) return corr;
  uint64_t end = 0;
  const uint64_t start = schedule_locked(stream, api_end + 1000, duration_ns, &end);
  auto* m = put_locked<ActivityMemcpyPtoP>(&g_device, kActMemcpy2);
  if (m == nullptr) return corr;
  m->copy_kind = 10;
  m->src_kind = m->dst_kind = 3;
  m->bytes = bytes;
  m->start = start;
  m->end = end;
  m->device_id = src_device;
  m->context_id = 1 + src_device;
  m->stream_id = stream;
  m->src_device_id = src_device;
  m->dst_device_id = dst_device;
  m->correlation_id = corr;
  return corr;
}
// cudaMemsetAsync (cbid 51).
__attribute__((visibility("default"))) uint32_t fake_cupti_memset(uint64_t bytes, uint32_t device,
                                                                  uint32_t stream,
                                                                  uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(false, 51, 1500, &api_end);
  if (!g_kinds.count(kActMemset)) return corr;
  uint64_t end = 0;
  const uint64_t start = schedule_locked(stream, api_end + 1000, duration_ns, &end);
  auto* m = put_locked<ActivityMemset>(&g_device, kActMemset);
  if (m == nullptr) return corr;
  m->bytes = bytes;
  m->start = start;
  m->end = end;
  m->device_id = device;
  m->context_id = 1 + device;
  m->stream_id = stream;
  m->correlation_id = corr;
  m->memory_kind = 3;
  return corr;
}
// A synchronisation call: type 3 = cudaStreamSynchronize (cbid 131) waiting for `stream` until
// its queued work is done; 4 = cudaDeviceSynchronize (cbid 165); 1 = cudaEventSynchronize (137).
__attribute__((visibility("default"))) uint32_t fake_cupti_sync(int32_t type, uint32_t device,
                                                                uint32_t stream) {
  std::lock_guard<std::mutex> lk(mu);
  const uint32_t cbid = type == kSyncStream ? 131 : type == kSyncContext ? 165 : 137;
  const uint64_t start = now_locked();
  uint64_t done = start + 500;
  if (type == kSyncContext) {
    for (auto& [s, t] : g_stream_free) done = t > done ? t : done;
  } else if (g_stream_free.count(stream) && g_stream_free[stream] > done) {
    done = g_stream_free[stream];
  }
  uint64_t api_end = 0;
  const uint32_t corr = api_call_locked(false, cbid, done - start, &api_end);
  if (!g_kinds.count(kActSynchronization)) return corr;
  auto* s = put_locked<ActivitySynchronization>(&g_host, kActSynchronization);
  if (s == nullptr) return corr;
  s->type = type;
  s->start = start;
  s->end = api_end;
  s->correlation_id = corr;
  s->context_id = 1 + device;
  s->stream_id = type == kSyncContext ? 0xffffffffu : stream;
  return corr;
}
// An NVTX range (push/pop) of duration_ns on this thread: a START and an END marker record.
__attribute__((visibility("default"))) uint32_t fake_cupti_nvtx_range(const char* name,
                                                                      const char* domain,
                                                                      uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  const uint32_t id = g_next_marker++;
  if (!g_kinds.count(kActMarker)) return id;
  const uint64_t t0 = now_locked();
  for (int i = 0; i < 2; ++i) {
    auto* m = put_locked<ActivityMarker>(&g_host, kActMarker);
    if (m == nullptr) continue;
    m->flags = i == 0 ? kMarkerStart : kMarkerEnd;
    m->timestamp = i == 0 ? t0 : t0 + duration_ns;
    m->id = id;
    m->object_kind = kObjectThread;
    m->object_id.a = static_cast<uint32_t>(getpid());
    m->object_id.b = tid();
    m->name = i == 0 ? keep(name) : nullptr;
    m->domain = keep(domain);
  }
  return id;
}
// An NVTX instant marker (nvtxMark).
__attribute__((visibility("default"))) uint32_t fake_cupti_nvtx_mark(const char* name) {
  std::lock_guard<std::mutex> lk(mu);
  const uint32_t id = g_next_marker++;
  if (!g_kinds.count(kActMarker)) return id;
  auto* m = put_locked<ActivityMarker>(&g_host, kActMarker);
  if (m == nullptr) return id;
  m->flags = kMarkerInstantaneous;
  m->timestamp = now_locked();
  m->id = id;
  m->object_kind = kObjectThread;
  m->object_id.b = tid();
  m->name = keep(name);
  return id;
}
// Only the END record of an NVTX range (its START was lost): tests unmatched markers.
__attribute__((visibility("default"))) void fake_cupti_nvtx_orphan_end() {
  std::lock_guard<std::mutex> lk(mu);
  auto* m = put_locked<ActivityMarker>(&g_host, kActMarker);
  if (m == nullptr) return;
  m->flags = kMarkerEnd;
  m->timestamp = now_locked();
  m->id = 0xfffffff0u;
}
// CUPTI's own overhead record (kind: 1<<16 buffer flush, 2<<16 instrumentation, ...).
__attribute__((visibility("default"))) void fake_cupti_overhead(int32_t kind,
                                                                uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  if (!g_kinds.count(kActOverhead)) return;
  auto* o = put_locked<ActivityOverhead>(&g_host, kActOverhead);
  if (o == nullptr) return;
  o->overhead_kind = kind;
  o->object_kind = kObjectThread;
  o->object_id.b = tid();
  o->start = now_locked();
  o->end = o->start + duration_ns;
}
// A record of a kind stallscope does not read, then an invalid (incomplete) record: everything
// written after it in the same host buffer is unreadable, as with CUPTI.
__attribute__((visibility("default"))) void fake_cupti_unknown_record() {
  std::lock_guard<std::mutex> lk(mu);
  put_locked<Activity>(&g_host, 1000);
  if (g_host.data != nullptr) g_host.used += 32 - sizeof(Activity);
}
__attribute__((visibility("default"))) void fake_cupti_incomplete_record() {
  std::lock_guard<std::mutex> lk(mu);
  uint8_t* p = reserve_locked(&g_host, 40);
  if (p != nullptr) reinterpret_cast<Activity*>(p)->kind = kActInvalid;
}
// Hand the buffers being filled to the worker now (as when they fill up).
__attribute__((visibility("default"))) void fake_cupti_complete_buffers() {
  std::lock_guard<std::mutex> lk(mu);
  hand_over_locked(&g_host);
  hand_over_locked(&g_device);
}
// Another tool registers its own buffer callbacks over the current ones (as torch.profiler
// would when started during a stallscope trace): buffers already handed out complete to it.
void hijack_request(uint8_t** b, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *b = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
void hijack_complete(void*, uint32_t, uint8_t* b, size_t, size_t) { std::free(b); }
__attribute__((visibility("default"))) void fake_cupti_hijack() {
  std::lock_guard<std::mutex> lk(mu);
  g_request = hijack_request;
  g_complete = hijack_complete;
}
__attribute__((visibility("default"))) int fake_cupti_kind_enabled(int32_t kind) {
  std::lock_guard<std::mutex> lk(mu);
  return g_kinds.count(kind) ? 1 : 0;
}
__attribute__((visibility("default"))) int fake_cupti_runtime_enabled(uint32_t cbid) {
  std::lock_guard<std::mutex> lk(mu);
  return g_runtime_cbids.count(cbid) ? 1 : 0;
}
__attribute__((visibility("default"))) int fake_cupti_runtime_enabled_count() {
  std::lock_guard<std::mutex> lk(mu);
  return static_cast<int>(g_runtime_cbids.size());
}
__attribute__((visibility("default"))) int fake_cupti_driver_enabled(uint32_t cbid) {
  std::lock_guard<std::mutex> lk(mu);
  return g_driver_cbids.count(cbid) ? 1 : 0;
}
// Depth of the calling thread's external-id stack of `kind`; its top in *top.
__attribute__((visibility("default"))) int fake_cupti_ext_depth(int32_t kind, uint64_t* top) {
  std::lock_guard<std::mutex> lk(mu);
  auto it = g_ext_stacks[kind].find(std::this_thread::get_id());
  if (it == g_ext_stacks[kind].end() || it->second.empty()) return 0;
  if (top != nullptr) *top = it->second.back();
  return static_cast<int>(it->second.size());
}
// Counters: 0 finalize calls, 1 FlushAll calls, 2 forced flushes, 3 declined requests,
// 4 buffers delivered, 5 enable-before-timestamp-callback, 6 flush period ms, 7 callbacks
// registered, 8 timestamp callback registered, 9 device buffer size attribute.
__attribute__((visibility("default"))) uint64_t fake_cupti_counter(int which) {
  std::lock_guard<std::mutex> lk(mu);
  switch (which) {
    case 0:
      return g_finalized;
    case 1:
      return g_flush_calls;
    case 2:
      return g_forced_flushes;
    case 3:
      return g_declined;
    case 4:
      return g_delivered;
    case 5:
      return g_enable_before_ts ? 1 : 0;
    case 6:
      return g_flush_period;
    case 7:
      return g_complete != nullptr ? 1 : 0;
    case 8:
      return g_ts != nullptr ? 1 : 0;
    case 9:
      return g_device_buffer_size;
    default:
      return 0;
  }
}

}  // extern "C"

namespace {
// Join the worker at unload so the process exits cleanly.
struct WorkerJoiner {
  ~WorkerJoiner() {
    {
      std::lock_guard<std::mutex> lk(mu);
      g_worker_stop = true;
      g_cv.notify_all();
    }
    if (g_worker.joinable()) g_worker.join();
  }
} g_joiner;
}  // namespace
