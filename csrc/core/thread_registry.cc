#include "thread_registry.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <new>

namespace stallscope {

ThreadRegistry g_registry;

namespace {

// The calling thread's claim, in one trivially-initialised block: the recording path finds it
// with a single TLS address computation and no initialisation guard.
struct ThreadState {
  Ring* ring;
  ThreadSlot* slot;
  uint64_t generation;         // generation `ring` was claimed in
  uint64_t failed_generation;  // generation in which the pool was full for this thread
  int32_t lane;                // OS thread id, cached: gettid is a syscall
};
thread_local ThreadState t_state = {nullptr, nullptr, 0, 0, 0};

// Constructed on first use (in the cold claim path); its destructor runs at thread exit.
struct SlotReleaser {
  ~SlotReleaser() {
    if (t_state.slot != nullptr && t_state.generation == g_registry.generation()) {
      g_registry.retire(t_state.slot);
    }
    t_state.ring = nullptr;
    t_state.slot = nullptr;
  }
};
thread_local SlotReleaser t_releaser;

uint64_t round_up_pow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

bool ThreadRegistry::configure(uint32_t max_threads, uint64_t ring_capacity) {
  install_fork_handler();
  if (max_threads == 0) max_threads = 1;
  ring_capacity = round_up_pow2(ring_capacity < 16 ? 16 : ring_capacity);
  if (slots_ != nullptr && max_threads == num_slots_ && ring_capacity == ring_capacity_) {
    return true;
  }
  // Untouched pages of the mapping are not resident, so a large pool costs only what is used.
  const size_t ring_bytes = ring_capacity * sizeof(EventRecord);
  void* mem = mmap(nullptr, ring_bytes * max_threads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) return false;
  auto* slots = new (std::nothrow) ThreadSlot[max_threads];
  auto* old = slots_ != nullptr ? new (std::nothrow) OldSlots{slots_, old_slots_} : nullptr;
  if (slots == nullptr || (slots_ != nullptr && old == nullptr)) {
    munmap(mem, ring_bytes * max_threads);
    delete[] slots;
    delete old;
    return false;
  }
  if (old != nullptr) old_slots_ = old;
  for (uint32_t i = 0; i < max_threads; ++i) {
    slots[i].ring.attach(reinterpret_cast<EventRecord*>(static_cast<char*>(mem) + i * ring_bytes),
                         ring_capacity);
  }
  // The old pool stays mapped (a thread that raced past the enabled check may still write into
  // it) but its pages are given back to the OS. Reconfiguring is rare (a new ring size).
  if (pool_ != nullptr) madvise(pool_, pool_bytes_, MADV_DONTNEED);
  pool_ = mem;
  pool_bytes_ = ring_bytes * max_threads;
  slots_ = slots;
  num_slots_ = max_threads;
  ring_capacity_ = ring_capacity;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  retired_stats_.clear();
  return true;
}

Ring* ThreadRegistry::ring_for_current_thread() noexcept {
  const uint64_t gen = generation();
  if (t_state.ring != nullptr && t_state.generation == gen) return t_state.ring;
  if (t_state.failed_generation == gen) {
    count_no_slot_drop();
    return nullptr;
  }
  Ring* r = claim(gen);
  if (r == nullptr) {
    t_state.failed_generation = gen;
    count_no_slot_drop();
  }
  return r;
}

Ring* ThreadRegistry::claim(uint64_t gen) noexcept {
  if (slots_ == nullptr) return nullptr;
  for (uint32_t i = 0; i < num_slots_; ++i) {
    ThreadSlot& s = slots_[i];
    int expected = static_cast<int>(SlotState::kFree);
    if (!s.state.compare_exchange_strong(expected, static_cast<int>(SlotState::kClaiming),
                                         std::memory_order_acq_rel)) {
      continue;
    }
    s.ring.reset();
    s.pushed_base = 0;
    s.dropped_base = 0;
    s.tid = static_cast<int32_t>(syscall(SYS_gettid));
    std::memset(s.thread_name, 0, sizeof(s.thread_name));
    pthread_getname_np(pthread_self(), s.thread_name, sizeof(s.thread_name));
    s.state.store(static_cast<int>(SlotState::kOwned), std::memory_order_release);
    (void)&t_releaser;  // first touch registers the thread-exit destructor
    t_state.slot = &s;
    t_state.ring = &s.ring;
    t_state.generation = gen;
    return t_state.ring;
  }
  return nullptr;
}

void ThreadRegistry::retire(ThreadSlot* slot) noexcept {
  slot->state.store(static_cast<int>(SlotState::kRetired), std::memory_order_release);
}

void ThreadRegistry::recycle_if_drained(ThreadSlot* slot) {
  if (slot->state.load(std::memory_order_acquire) != static_cast<int>(SlotState::kRetired)) return;
  if (slot->ring.size() != 0) return;
  retired_stats_.push_back({slot->tid, slot->thread_name, slot->ring.pushed() - slot->pushed_base,
                            slot->ring.dropped() - slot->dropped_base, 0, false});
  slot->state.store(static_cast<int>(SlotState::kFree), std::memory_order_release);
}

std::vector<ThreadStats> ThreadRegistry::stats() {
  std::vector<ThreadStats> out = retired_stats_;
  for (uint32_t i = 0; i < num_slots_; ++i) {
    ThreadSlot& s = slots_[i];
    const int st = s.state.load(std::memory_order_acquire);
    if (st != static_cast<int>(SlotState::kOwned) && st != static_cast<int>(SlotState::kRetired)) {
      continue;
    }
    out.push_back({s.tid, s.thread_name, s.ring.pushed() - s.pushed_base,
                   s.ring.dropped() - s.dropped_base, s.ring.size(),
                   st == static_cast<int>(SlotState::kOwned)});
  }
  return out;
}

void ThreadRegistry::reset_stats() {
  retired_stats_.clear();
  no_slot_drops_.store(0, std::memory_order_relaxed);
  for (uint32_t i = 0; i < num_slots_; ++i) {
    slots_[i].pushed_base = slots_[i].ring.pushed();
    slots_[i].dropped_base = slots_[i].ring.dropped();
  }
}

void ThreadRegistry::reset_after_fork() noexcept {
  enabled_.store(false, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < num_slots_; ++i) {
    slots_[i].ring.reset();
    slots_[i].state.store(static_cast<int>(SlotState::kFree), std::memory_order_relaxed);
  }
  retired_stats_.clear();
  no_slot_drops_.store(0, std::memory_order_relaxed);
  t_state.ring = nullptr;
  t_state.slot = nullptr;
  t_state.failed_generation = 0;
  t_state.lane = 0;  // the child's thread has a new id
}

}  // namespace stallscope

// ---- The recording path (lives here because it reads this file's thread-locals) ----
#include "recorder.h"

namespace stallscope {

bool recording() noexcept { return g_registry.enabled(); }

int32_t current_lane() noexcept {
  if (__builtin_expect(t_state.lane == 0, 0))
    t_state.lane = static_cast<int32_t>(syscall(SYS_gettid));
  return t_state.lane;
}

bool record(const EventRecord& e) noexcept {
  if (!g_registry.enabled()) return false;
  ThreadState& ts = t_state;
  Ring* r = ts.ring;
  if (__builtin_expect(r == nullptr || ts.generation != g_registry.generation(), 0)) {
    r = g_registry.ring_for_current_thread();
    if (r == nullptr) return false;
  }
  return r->push(e);
}

}  // namespace stallscope
