// The slow half of external correlation: reached from step() and regions only while the CUPTI
// backend runs (ext_correlation.h).
#include "ext_correlation.h"

#include <atomic>
#include <thread>

#include "cupti_abi.h"
#include "cupti_loader.h"
#include "thread_lanes.h"

namespace stallscope::cupti {

std::atomic<bool> g_ext_on{false};

namespace {
std::atomic<uint32_t> g_session{0};  // bumped by every session: stale pushes are never popped
std::atomic<int> g_ext_inflight{0};  // threads inside a push or pop
std::atomic<uint64_t> g_ext_push_errors{0};
}  // namespace

namespace {
thread_local uint32_t t_step_session = 0;          // session in which this thread pushed a step
thread_local uint32_t t_region_session[256] = {};  // per region depth: session of its push
struct InflightGuard {
  InflightGuard() { g_ext_inflight.fetch_add(1, std::memory_order_acq_rel); }
  ~InflightGuard() { g_ext_inflight.fetch_sub(1, std::memory_order_acq_rel); }
};
}  // namespace

void ext_step_slow(int64_t step_index) noexcept {
  InflightGuard g;
  register_thread();
  if (!g_ext_on.load(std::memory_order_acquire)) return;
  const uint32_t s = g_session.load(std::memory_order_relaxed);
  const Api& a = api();
  if (t_step_session == s) {
    uint64_t last = 0;
    if (a.ActivityPopExternalCorrelationId(kExtCustom0, &last) != kSuccess) g_ext_push_errors++;
  }
  if (a.ActivityPushExternalCorrelationId(kExtCustom0, static_cast<uint64_t>(step_index)) ==
      kSuccess) {
    t_step_session = s;
  } else {
    t_step_session = 0;
    g_ext_push_errors++;
  }
}

void ext_region_enter_slow(int depth, uint32_t name_id) noexcept {
  if (depth < 0 || depth >= 256) return;
  InflightGuard g;
  register_thread();
  t_region_session[depth] = 0;
  if (!g_ext_on.load(std::memory_order_acquire)) return;
  if (api().ActivityPushExternalCorrelationId(kExtCustom1, name_id) == kSuccess) {
    t_region_session[depth] = g_session.load(std::memory_order_relaxed);
  } else {
    g_ext_push_errors++;
  }
}

void ext_region_exit_slow(int depth) noexcept {
  if (depth < 0 || depth >= 256) return;
  InflightGuard g;
  if (!g_ext_on.load(std::memory_order_acquire)) return;
  if (t_region_session[depth] != g_session.load(std::memory_order_relaxed)) return;
  t_region_session[depth] = 0;
  uint64_t last = 0;
  if (api().ActivityPopExternalCorrelationId(kExtCustom1, &last) != kSuccess) g_ext_push_errors++;
}

void ext_session_begin(bool on) noexcept {
  g_ext_push_errors.store(0, std::memory_order_relaxed);
  g_session.fetch_add(1, std::memory_order_acq_rel);
  g_ext_on.store(on, std::memory_order_release);
}

void ext_session_end() noexcept {
  // No new pushes; wait (bounded) for threads inside a push or pop to leave it.
  g_ext_on.store(false, std::memory_order_release);
  for (int i = 0; i < 100000 && g_ext_inflight.load(std::memory_order_acquire) != 0; ++i) {
    std::this_thread::yield();
  }
  if (t_step_session == g_session.load()) {  // the stopping thread's own step id
    uint64_t last = 0;
    api().ActivityPopExternalCorrelationId(kExtCustom0, &last);
    t_step_session = 0;
  }
}

uint64_t ext_push_errors() noexcept { return g_ext_push_errors.load(std::memory_order_relaxed); }

void ext_after_fork() noexcept {
  g_ext_on.store(false, std::memory_order_relaxed);
  g_ext_inflight.store(0, std::memory_order_relaxed);
}

}  // namespace stallscope::cupti
