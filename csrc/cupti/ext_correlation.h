// External correlation from the Python hot path: while the CUPTI backend runs, step() pushes the
// step index (CUSTOM0) and regions push their name id (CUSTOM1) on the calling thread, so CUPTI
// tags every launch, copy and sync with the step and innermost region that issued it.
// With CUPTI off the cost is one relaxed load of a global flag per call.
#pragma once

#include <atomic>
#include <cstdint>

namespace stallscope::cupti {

extern std::atomic<bool> g_ext_on;  // true between a successful start() and stop()

void ext_step_slow(int64_t step_index) noexcept;
void ext_region_enter_slow(int depth, uint32_t name_id) noexcept;
void ext_region_exit_slow(int depth) noexcept;

// Session control, for the backend: begin (pushes on when `on`), end (off, waits for threads in a
// push, pops the calling thread's step id), push/pop errors, fork child reset.
void ext_session_begin(bool on) noexcept;
void ext_session_end() noexcept;
uint64_t ext_push_errors() noexcept;
void ext_after_fork() noexcept;

inline void ext_step(int64_t step_index) noexcept {
  if (g_ext_on.load(std::memory_order_relaxed)) ext_step_slow(step_index);
}
inline void ext_region_enter(int depth, uint32_t name_id) noexcept {
  if (g_ext_on.load(std::memory_order_relaxed)) ext_region_enter_slow(depth, name_id);
}
inline void ext_region_exit(int depth) noexcept {
  if (g_ext_on.load(std::memory_order_relaxed)) ext_region_exit_slow(depth);
}

}  // namespace stallscope::cupti
