// The fake libcupti's control API: what the tests call (through ctypes) to play CUDA calls,
// GPU work and CUPTI's failures, and to read its counters. Test-only.

#include "fake_cupti_state.h"

using namespace fake_cupti;

extern "C" {

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
  uint32_t corr = 0;
  uint64_t api_end = 0;
  auto* k =
      gpu_work_locked<ActivityKernel>(kActConcurrentKernel, driver != 0, driver ? 652 : 211, api_ns,
                                      device, stream, delay_ns, duration_ns, &corr, &api_end);
  if (k == nullptr) return corr;
  k->completed = k->end;
  k->grid_x = 128;
  k->grid_y = k->grid_z = 1;
  k->block_x = 256;
  k->block_y = k->block_z = 1;
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
  uint32_t corr = 0;
  auto* m = gpu_work_locked<ActivityMemcpy>(kActMemcpy, false, 41, 2000, device, stream, 1000,
                                            duration_ns, &corr);
  if (m == nullptr) return corr;
  m->copy_kind = static_cast<uint8_t>(copy_kind);
  m->src_kind = static_cast<uint8_t>(src_kind);
  m->dst_kind = static_cast<uint8_t>(dst_kind);
  m->bytes = bytes;
  return corr;
}
// cudaMemcpyPeerAsync (cbid 161): a MEMCPY2 record.
__attribute__((visibility("default"))) uint32_t fake_cupti_memcpy_p2p(uint32_t src_device,
                                                                      uint32_t dst_device,
                                                                      uint64_t bytes,
                                                                      uint32_t stream,
                                                                      uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  uint32_t corr = 0;
  auto* m = gpu_work_locked<ActivityMemcpyPtoP>(kActMemcpy2, false, 161, 2000, src_device, stream,
                                                1000, duration_ns, &corr);
  if (m == nullptr) return corr;
  m->copy_kind = 10;
  m->src_kind = m->dst_kind = 3;
  m->bytes = bytes;
  m->src_device_id = src_device;
  m->dst_device_id = dst_device;
  return corr;
}
// cudaMemsetAsync (cbid 51).
__attribute__((visibility("default"))) uint32_t fake_cupti_memset(uint64_t bytes, uint32_t device,
                                                                  uint32_t stream,
                                                                  uint64_t duration_ns) {
  std::lock_guard<std::mutex> lk(mu);
  uint32_t corr = 0;
  auto* m = gpu_work_locked<ActivityMemset>(kActMemset, false, 51, 1500, device, stream, 1000,
                                            duration_ns, &corr);
  if (m == nullptr) return corr;
  m->bytes = bytes;
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
