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

#include "fake_cupti_state.h"

namespace fake_cupti {

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

}  // namespace fake_cupti

using namespace fake_cupti;

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

}  // extern "C"
