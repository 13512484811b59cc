#include "activity_backend.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity_names.h"
#include "buffer_pool.h"
#include "core/clock.h"
#include "core/event_record.h"
#include "core/recorder.h"
#include "core/string_table.h"
#include "cupti_abi.h"
#include "cupti_loader.h"
#include "ext_correlation.h"
#include "thread_lanes.h"

namespace stallscope::cupti {

namespace {

// ---- state ---------------------------------------------------------------------------------
std::mutex g_ctl_mu;   // start / stop
std::mutex g_proc_mu;  // buffer parsing (CUPTI's worker thread, or a flushing thread)
std::atomic<bool> g_active{false};
Options g_opts;
Stats g_stats;  // updated under g_proc_mu (pool counters live in g_pool)
std::vector<std::string> g_enabled_kinds;

// ---- buffer pool ---------------------------------------------------------------------------
BufferPool g_pool;

void CUPTI_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // fill the buffer
  *buffer = g_pool.request(size);
}

// ---- correlation: CUPTI correlation id -> (step, region) -------------------------------------
// Direct-mapped by correlation id (ids grow monotonically): old entries are overwritten.
struct ExtEntry {
  uint32_t correlation;
  uint32_t region;  // region name id, 0 = none
  int64_t step;     // step index, 0 = none
};
constexpr uint32_t kExtSlots = 1u << 16;
ExtEntry g_ext[kExtSlots];

ExtEntry* ext_slot(uint32_t corr, bool create) {
  ExtEntry* e = &g_ext[corr & (kExtSlots - 1)];
  if (e->correlation != corr) {
    if (!create) return nullptr;
    *e = ExtEntry{corr, 0, 0};
  }
  return e;
}

// detail "step=N;region=NAME" (+ a fixed suffix), cached per combination.
struct DetailKey {
  int64_t step;
  uint32_t region;
  uint32_t extra;
  bool operator==(const DetailKey& o) const {
    return step == o.step && region == o.region && extra == o.extra;
  }
};
struct DetailHash {
  size_t operator()(const DetailKey& k) const noexcept {
    return std::hash<int64_t>{}(k.step * 1000003 + k.region) ^ (size_t{k.extra} << 20);
  }
};
std::unordered_map<DetailKey, uint32_t, DetailHash> g_details;
std::unordered_map<uint32_t, std::string> g_extra_strings;  // extra id -> its text

// Region names by id, looked up once per distinct region.
std::unordered_map<uint32_t, std::string> g_region_names;
const std::string& region_name(uint32_t id) {
  auto it = g_region_names.find(id);
  if (it != g_region_names.end()) return it->second;
  std::vector<std::string> tail = StringTable::instance().strings_from(id);
  return g_region_names.emplace(id, tail.empty() ? std::string("?") : tail[0]).first->second;
}

uint32_t detail_id(uint32_t corr, uint32_t extra) {
  const ExtEntry* e = ext_slot(corr, false);
  const int64_t step = e != nullptr ? e->step : 0;
  const uint32_t region = e != nullptr ? e->region : 0;
  if (step == 0 && region == 0) return extra;
  const DetailKey k{step, region, extra};
  auto it = g_details.find(k);
  if (it != g_details.end()) return it->second;
  if (g_details.size() > 65536) g_details.clear();  // bounded: steps only move forward
  std::string s;
  if (step != 0) s += "step=" + std::to_string(step);
  if (region != 0) {
    if (!s.empty()) s += ';';
    s += "region=" + region_name(region);
  }
  if (extra != 0) {
    if (!s.empty()) s += ';';
    s += g_extra_strings[extra];
  }
  const uint32_t id = intern(s);
  g_details.emplace(k, id);
  return id;
}

uint32_t extra_id(const std::string& s) {
  const uint32_t id = fixed_id(s);
  g_extra_strings.emplace(id, s);
  return id;
}

// ---- context -> device ---------------------------------------------------------------------
std::unordered_map<uint32_t, int16_t> g_ctx_device;
int16_t device_of_context(uint32_t ctx) {
  auto it = g_ctx_device.find(ctx);
  return it != g_ctx_device.end() ? it->second : -1;
}
void note_context(uint32_t ctx, uint32_t device) {
  if (g_ctx_device.size() < 4096) g_ctx_device.emplace(ctx, static_cast<int16_t>(device));
}

// ---- NVTX ranges: START and END records with one id ----------------------------------------
struct OpenMarker {
  int64_t start;
  uint32_t name_id;
  uint32_t detail_id;
  int32_t lane;
};
std::unordered_map<uint32_t, OpenMarker> g_open_markers;

// ---- records -> events -----------------------------------------------------------------------
void emit(const EventRecord& e) {
  if (record(e)) {
    g_stats.events++;
  } else {
    g_stats.events_not_recorded++;
  }
}

// GPU activity: its category is left to the one shared classifier (python/stallscope/
// _schema/_classify.py), which the writer applies to rows marked kCategoryUnclassified.
EventRecord gpu_event(Kind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                      uint32_t corr) {
  EventRecord e{};
  e.start_ns = static_cast<int64_t>(start);
  e.end_ns = static_cast<int64_t>(end);
  e.correlation = corr;
  e.lane = static_cast<int32_t>(stream);
  e.device = static_cast<int16_t>(device);
  e.kind = static_cast<uint8_t>(kind);
  e.category = kCategoryUnclassified;
  return e;
}

bool bad_times(uint64_t start, uint64_t end) { return start == 0 || end == 0 || end < start; }

// What every kernel / memcpy / memset record shares: its context's device noted, its times
// checked (a record without them counts as incomplete: false, nothing to emit), `counter`
// counted, and *e its GPU event (the caller adds name, detail, bytes). R: a record with
// context_id, device_id, stream_id, correlation_id, start and end.
template <typename R>
bool gpu_record(const R* r, Kind kind, uint64_t* counter, EventRecord* e) {
  note_context(r->context_id, r->device_id);
  if (bad_times(r->start, r->end)) {
    g_stats.incomplete++;
    return false;
  }
  ++*counter;
  *e = gpu_event(kind, r->start, r->end, r->device_id, r->stream_id, r->correlation_id);
  return true;
}

void parse(const Activity* a) {
  g_stats.records++;
  switch (a->kind) {
    case kActConcurrentKernel:
    case kActKernel: {
      const auto* k = reinterpret_cast<const ActivityKernel*>(a);
      EventRecord e{};  // not emitted when no timing was collected (device buffer full)
      if (!gpu_record(k, Kind::kKernel, &g_stats.kernels, &e)) return;
      e.name_id = kernel_name_id(k->name);
      e.detail_id = detail_id(k->correlation_id, 0);
      emit(e);
      return;
    }
    case kActMemcpy: {
      const auto* m = reinterpret_cast<const ActivityMemcpy*>(a);
      EventRecord e{};
      if (!gpu_record(m, Kind::kMemcpy, &g_stats.memcpys, &e)) return;
      e.bytes = static_cast<int64_t>(m->bytes);
      e.name_id = memcpy_name_id(m->copy_kind, m->src_kind, m->dst_kind);
      e.detail_id = detail_id(m->correlation_id, 0);
      emit(e);
      return;
    }
    case kActMemcpy2: {
      const auto* m = reinterpret_cast<const ActivityMemcpyPtoP*>(a);
      EventRecord e{};
      if (!gpu_record(m, Kind::kMemcpy, &g_stats.memcpys, &e)) return;
      e.bytes = static_cast<int64_t>(m->bytes);
      e.name_id = memcpy_name_id(10, m->src_kind, m->dst_kind);
      e.detail_id =
          detail_id(m->correlation_id, extra_id("src_device=" + std::to_string(m->src_device_id) +
                                                ";dst_device=" + std::to_string(m->dst_device_id)));
      emit(e);
      return;
    }
    case kActMemset: {
      const auto* m = reinterpret_cast<const ActivityMemset*>(a);
      EventRecord e{};
      if (!gpu_record(m, Kind::kMemset, &g_stats.memsets, &e)) return;
      e.bytes = static_cast<int64_t>(m->bytes);
      e.name_id = fixed_id(std::string("Memset (") + memory_kind_name(m->memory_kind & 0xff) + ")");
      e.detail_id = detail_id(m->correlation_id, 0);
      emit(e);
      return;
    }
    case kActSynchronization: {
      const auto* s = reinterpret_cast<const ActivitySynchronization*>(a);
      if (bad_times(s->start, s->end)) {
        g_stats.incomplete++;
        return;
      }
      g_stats.syncs++;
      EventRecord e =
          gpu_event(Kind::kGpuSync, s->start, s->end, 0, s->stream_id, s->correlation_id);
      e.device = device_of_context(s->context_id);
      if (s->stream_id == 0xffffffffu) e.lane = -1;  // context-wide
      e.name_id = fixed_id(sync_name(s->type));
      e.detail_id = detail_id(s->correlation_id, 0);
      emit(e);
      return;
    }
    case kActExternalCorrelation: {
      const auto* x = reinterpret_cast<const ActivityExternalCorrelation*>(a);
      g_stats.external_correlations++;
      ExtEntry* e = ext_slot(x->correlation_id, true);
      if (x->external_kind == kExtCustom0) {
        e->step = static_cast<int64_t>(x->external_id);
      } else if (x->external_kind == kExtCustom1) {
        e->region = static_cast<uint32_t>(x->external_id);
      }
      return;
    }
    case kActRuntime:
    case kActDriver: {
      const auto* r = reinterpret_cast<const ActivityApi*>(a);
      if (bad_times(r->start, r->end)) {
        g_stats.incomplete++;
        return;
      }
      g_stats.runtime_calls++;
      EventRecord e{};
      e.start_ns = static_cast<int64_t>(r->start);
      e.end_ns = static_cast<int64_t>(r->end);
      e.correlation = r->correlation_id;
      e.lane = lane_of_thread(r->thread_id);
      e.device = -1;
      e.kind = static_cast<uint8_t>(Kind::kRuntime);
      e.category = static_cast<uint8_t>(Category::kHost);
      e.name_id = api_name_id(a->kind == kActDriver, r->cbid);
      e.detail_id = detail_id(r->correlation_id, 0);
      emit(e);
      return;
    }
    case kActMarker: {
      const auto* m = reinterpret_cast<const ActivityMarker*>(a);
      g_stats.markers++;
      const int32_t lane = m->object_kind == kObjectThread ? lane_of_thread(m->object_id.b) : 0;
      const int64_t ts = static_cast<int64_t>(m->timestamp);
      uint32_t detail = 0;
      if (m->domain != nullptr && m->domain[0] != '\0') {
        detail = fixed_id(std::string("domain=") + m->domain);
      }
      if ((m->flags & kMarkerStart) != 0) {
        if (g_open_markers.size() >= 65536) {  // bounded: oldest unmatched forgotten, counted
          g_stats.unmatched_markers += g_open_markers.size();
          g_open_markers.clear();
        }
        g_open_markers[m->id] =
            OpenMarker{ts, intern(m->name != nullptr ? m->name : ""), detail, lane};
        return;
      }
      EventRecord e{};
      e.kind = static_cast<uint8_t>(Kind::kMarker);
      e.category = static_cast<uint8_t>(Category::kOther);
      e.device = -1;
      if ((m->flags & kMarkerEnd) != 0) {
        auto it = g_open_markers.find(m->id);
        if (it == g_open_markers.end()) {
          g_stats.unmatched_markers++;
          return;
        }
        e.start_ns = it->second.start;
        e.end_ns = ts;
        e.name_id = it->second.name_id;
        e.detail_id = it->second.detail_id;
        e.lane = it->second.lane;
        g_open_markers.erase(it);
      } else {  // instantaneous
        e.start_ns = e.end_ns = ts;
        e.name_id = intern(m->name != nullptr ? m->name : "");
        e.detail_id = detail;
        e.lane = lane;
      }
      emit(e);
      return;
    }
    case kActOverhead: {
      const auto* o = reinterpret_cast<const ActivityOverhead*>(a);
      if (bad_times(o->start, o->end)) {
        g_stats.incomplete++;
        return;
      }
      g_stats.overheads++;
      EventRecord e{};
      e.start_ns = static_cast<int64_t>(o->start);
      e.end_ns = static_cast<int64_t>(o->end);
      e.lane = o->object_kind == kObjectThread ? lane_of_thread(o->object_id.b) : 0;
      e.device = -1;
      e.kind = static_cast<uint8_t>(Kind::kOverhead);
      e.category = static_cast<uint8_t>(Category::kOther);
      e.name_id = fixed_id(overhead_name(o->overhead_kind));
      emit(e);
      return;
    }
    default:
      g_stats.unknown_kind++;
      return;
  }
}

void count_dropped() {
  size_t dropped = 0;
  if (api().ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == kSuccess) {
    g_stats.cupti_dropped += dropped;
  }
}

void CUPTI_complete(void* /*ctx*/, uint32_t /*stream*/, uint8_t* buffer, size_t size,
                    size_t valid) {
  {
    std::lock_guard<std::mutex> lk(g_proc_mu);
    g_stats.buffers_completed++;
    if (buffer != nullptr && valid > 0) {
      Activity* rec = nullptr;
      for (;;) {
        const CUptiResult r = api().ActivityGetNextRecord(buffer, valid, &rec);
        if (r == kSuccess) {
          parse(rec);
          continue;
        }
        if (r == kErrInvalidKind) g_stats.incomplete++;  // incomplete record: the rest is unusable
        break;  // MAX_LIMIT_REACHED: end of buffer; anything else: stop reading it
      }
    }
    count_dropped();
  }
  if (buffer != nullptr) g_pool.release(buffer, size);
}

uint64_t CUPTI_timestamp() { return clock_now_ns_u64(); }

std::vector<int32_t> g_kinds_on;  // kinds this session enabled, to disable at stop

void disable_all() {
  for (int32_t k : g_kinds_on) api().ActivityDisable(k);
  g_kinds_on.clear();
  if (g_opts.runtime_api) {
    for (const ApiCall& c : runtime_calls()) api().ActivityEnableRuntimeApi(c.cbid, 0);
    if (api().ActivityEnableDriverApi != nullptr) {
      for (const ApiCall& c : driver_calls()) api().ActivityEnableDriverApi(c.cbid, 0);
    }
  }
}

void noop_callback(void*, int, uint32_t, const void*) {}

}  // namespace

// ---- fork ------------------------------------------------------------------------------------
namespace {
// A fork() child inherits none of CUPTI's worker threads or device state: the backend is off
// there (its steps and regions push nothing), and locks a parent thread held are reset.
void after_fork_in_child() {
  ext_after_fork();
  g_active.store(false, std::memory_order_relaxed);
  new (&g_ctl_mu) std::mutex();
  g_pool.reinit_after_fork();
  new (&g_proc_mu) std::mutex();
}
// Installed by the first start() (not a static initializer: the linker may drop objects of a
// static library that nothing references).
void install_fork_handler() {
  static const bool installed = [] {
    pthread_atfork(nullptr, nullptr, &after_fork_in_child);
    return true;
  }();
  (void)installed;
}
}  // namespace

// ---- control ---------------------------------------------------------------------------------
int probe_subscriber() {
  if (!loaded() || api().Subscribe == nullptr || api().Unsubscribe == nullptr) return -1;
  void* h = nullptr;
  const CUptiResult r = api().Subscribe(&h, noop_callback, nullptr);
  if (r == kSuccess) api().Unsubscribe(h);
  return r;
}

StartResult start(const Options& opts) {
  std::lock_guard<std::mutex> lk(g_ctl_mu);
  StartResult res;
  if (!loaded()) {
    res.error = "libcupti is not loaded";
    return res;
  }
  install_fork_handler();
  if (g_active.load()) {
    res.error = "the CUPTI backend is already running in this process";
    return res;
  }
  if (opts.buffer_bytes < 4096 || opts.pool_limit_bytes < opts.buffer_bytes) {
    res.error = "buffer_bytes must be >= 4096 and pool_limit_bytes >= buffer_bytes";
    return res;
  }
  const Api& a = api();
  // Another tool (nsys, ncu, a profiler using the callback API) holds CUPTI: leave it alone.
  const int sub = probe_subscriber();
  if (sub == kErrMultipleSubscribers) {
    res.other_subscriber = true;
    res.code = sub;
    res.error =
        "another CUPTI subscriber is attached to this process (Nsight Systems, Nsight Compute or "
        "another profiler): stallscope leaves CUPTI to it (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_"
        "SUPPORTED)";
    return res;
  }
  {
    std::lock_guard<std::mutex> pk(g_proc_mu);
    g_opts = opts;
    g_opts.buffer_bytes = (opts.buffer_bytes + 7) & ~uint64_t{7};  // aligned_alloc: multiple of 8
    if (g_opts.pool_limit_bytes < g_opts.buffer_bytes)
      g_opts.pool_limit_bytes = g_opts.buffer_bytes;
    g_stats = Stats{};
    g_pool.reset_session(g_opts.buffer_bytes, g_opts.pool_limit_bytes);
    std::memset(g_ext, 0, sizeof g_ext);
    g_details.clear();
    g_open_markers.clear();
    reset_lane_cache();
  }
  // One time base: stallscope's clock, registered before any kind is enabled.
  CUptiResult r = a.ActivityRegisterTimestampCallback(CUPTI_timestamp);
  if (r != kSuccess) {
    res.code = r;
    res.error = std::string("cuptiActivityRegisterTimestampCallback failed: ") + result_name(r);
    return res;
  }
  r = a.ActivityRegisterCallbacks(CUPTI_request, CUPTI_complete);
  if (r != kSuccess) {
    res.code = r;
    res.error = std::string("cuptiActivityRegisterCallbacks failed: ") + result_name(r);
    return res;
  }
  // CUPTI's dropped count is read (and so reset) at each buffer and at stop, but a record it
  // drops later, inside the previous session's cuptiFinalize, waits for the next read: after a
  // finalized session with OVERHEAD on, one record (seen on an H200, CUDA 13.0). Taken here, it
  // is reported apart from this session's drops.
  {
    size_t before = 0;
    if (a.ActivityGetNumDroppedRecords(nullptr, 0, &before) == kSuccess) {
      std::lock_guard<std::mutex> pk(g_proc_mu);
      g_stats.cupti_dropped_before = before;
    }
  }
  if (opts.device_buffer_bytes != 0 && a.ActivitySetAttribute != nullptr) {
    size_t v = opts.device_buffer_bytes, sz = sizeof v;
    a.ActivitySetAttribute(kAttrDeviceBufferSize, &sz, &v);
  }
  // CONCURRENT_KERNEL first and required (never KERNEL: it serialises kernels).
  std::vector<int32_t> kinds = {kActConcurrentKernel, kActMemcpy, kActMemcpy2, kActMemset,
                                kActSynchronization};
  if (opts.external_correlation) kinds.push_back(kActExternalCorrelation);
  if (opts.markers) kinds.push_back(kActMarker);
  if (opts.overhead) kinds.push_back(kActOverhead);
  g_kinds_on.clear();
  for (int32_t k : kinds) {
    r = a.ActivityEnable(k);
    if (r == kSuccess) {
      g_kinds_on.push_back(k);
      res.enabled.emplace_back(kind_name(k));
    } else if (k == kActConcurrentKernel) {
      res.code = r;
      res.error = std::string("cuptiActivityEnable(CONCURRENT_KERNEL) failed: ") + result_name(r) +
                  (r == kErrUnknown ? " (no NVIDIA driver or no GPU?)" : "") +
                  (r == kErrInsufficientPrivileges
                       ? " (GPU profiling needs NVreg_RestrictProfilingToAdminUsers=0 or root)"
                       : "");
      disable_all();
      return res;
    } else {
      res.failed.push_back(std::string(kind_name(k)) + ": " + result_name(r));
    }
  }
  if (opts.runtime_api) {
    // RUNTIME trimmed: only launch, copy and sync calls (the kind itself stays off).
    int ok = 0;
    for (const ApiCall& c : runtime_calls())
      ok += a.ActivityEnableRuntimeApi(c.cbid, 1) == kSuccess;
    if (ok > 0) {
      res.enabled.emplace_back("RUNTIME(launch,copy,sync)");
    } else {
      res.failed.emplace_back("RUNTIME(launch,copy,sync): refused");
    }
    if (a.ActivityEnableDriverApi != nullptr) {
      int dok = 0;
      for (const ApiCall& c : driver_calls())
        dok += a.ActivityEnableDriverApi(c.cbid, 1) == kSuccess;
      if (dok > 0) res.enabled.emplace_back("DRIVER(launch)");
    }
  }
  if (opts.flush_period_ms != 0 && a.ActivityFlushPeriod != nullptr) {
    a.ActivityFlushPeriod(opts.flush_period_ms);
  }
  g_enabled_kinds = res.enabled;
  register_thread();  // the thread that starts tracing usually launches the work
  g_active.store(true, std::memory_order_release);
  ext_session_begin(opts.external_correlation);
  res.ok = true;
  return res;
}

int flush(bool forced) {
  if (!loaded()) return kErrNotInitialized;
  // Under the start / stop lock: a flush racing cuptiFinalize on another thread can crash
  // (pytorch/kineto#686), and device windows finalize often.
  std::lock_guard<std::mutex> ck(g_ctl_mu);
  if (!g_active.load()) return kErrNotInitialized;
  const CUptiResult r = api().ActivityFlushAll(forced ? kFlushForced : 0);
  std::lock_guard<std::mutex> lk(g_proc_mu);
  g_stats.flushes++;
  return r;
}

Stats stop(bool finalize) {
  std::lock_guard<std::mutex> lk(g_ctl_mu);
  if (!g_active.load()) return stats();
  const Api& a = api();
  ext_session_end();
  disable_all();
  // Forced: every buffer comes back, incomplete ones included, before the trace's final drain.
  a.ActivityFlushAll(kFlushForced);
  {
    std::lock_guard<std::mutex> pk(g_proc_mu);
    g_stats.flushes++;
    count_dropped();
    g_stats.unmatched_markers += g_open_markers.size();
    g_open_markers.clear();
  }
  // Finalize so that CUPTI's instrumentation leaves the process: training after profiling runs
  // at full speed (pytorch/pytorch#146604). Never from inside a CUPTI callback.
  if (finalize) a.Finalize();
  g_active.store(false, std::memory_order_release);
  g_pool.free_idle();
  return stats();
}

bool active() noexcept { return g_active.load(std::memory_order_acquire); }

Stats stats() {
  Stats s;
  {
    std::lock_guard<std::mutex> pk(g_proc_mu);
    s = g_stats;
    s.distinct_kernel_names = distinct_kernel_names();
  }
  const PoolCounts pool = g_pool.counts();
  s.buffers_requested = pool.requested;
  s.buffers_declined = pool.declined;
  s.pool_bytes = pool.bytes;
  s.pool_peak_bytes = pool.peak_bytes;
  s.buffers_outstanding = pool.outstanding;
  s.ext_push_errors = ext_push_errors();
  return s;
}

}  // namespace stallscope::cupti
