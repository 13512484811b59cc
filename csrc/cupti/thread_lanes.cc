#include "thread_lanes.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/recorder.h"

namespace stallscope::cupti {

namespace {
// CUPTI's API, marker and overhead records name a thread by the low 32 bits of pthread_self()
// (Linux); stallscope's host events use the kernel thread id. Threads that use stallscope's API
// while CUPTI runs register the pair; an id that is already a thread of this process (older
// CUPTI, or the fake) is kept; anything else stays as CUPTI wrote it.
std::mutex g_thread_mu;
std::unordered_map<uint32_t, int32_t> g_thread_map;  // pthread_self low 32 bits -> OS tid
std::atomic<uint64_t> g_thread_map_gen{0};
thread_local bool t_thread_registered = false;

}  // namespace

void register_thread() noexcept {
  if (t_thread_registered) return;
  t_thread_registered = true;
  const pthread_t self = pthread_self();
  uint32_t low = 0;
  std::memcpy(&low, &self, sizeof low);
  try {
    std::lock_guard<std::mutex> lk(g_thread_mu);
    g_thread_map[low] = current_lane();
    g_thread_map_gen.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {  // allocation failure: the lane stays CUPTI's id
  }
}

namespace {
struct LaneCacheEntry {
  int32_t lane;
  uint64_t gen;  // map generation when a miss was cached (re-checked once the map grows)
  bool hit;
};
std::unordered_map<uint32_t, LaneCacheEntry> g_lane_cache;  // serialised by the caller

}  // namespace

void reset_lane_cache() { g_lane_cache.clear(); }

int32_t lane_of_thread(uint32_t cupti_tid) {
  const uint64_t gen = g_thread_map_gen.load(std::memory_order_relaxed);
  auto it = g_lane_cache.find(cupti_tid);
  if (it != g_lane_cache.end() && (it->second.hit || it->second.gen == gen)) {
    return it->second.lane;
  }
  {
    std::lock_guard<std::mutex> lk(g_thread_mu);
    auto m = g_thread_map.find(cupti_tid);
    if (m != g_thread_map.end()) {
      g_lane_cache[cupti_tid] = {m->second, gen, true};
      return m->second;
    }
  }
  const std::string task = "/proc/self/task/" + std::to_string(cupti_tid);
  const bool is_tid = access(task.c_str(), F_OK) == 0;
  g_lane_cache[cupti_tid] = {static_cast<int32_t>(cupti_tid), gen, is_tid};
  return static_cast<int32_t>(cupti_tid);
}

}  // namespace stallscope::cupti
