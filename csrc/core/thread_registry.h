// The pool of per-thread rings. A recording thread claims a slot at its first event (a bounded,
// lock-free scan of a pool allocated at start) and keeps it until it exits; the collector drains
// every slot. Also holds the process-wide "recording enabled" switch and the fork handling.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "event_record.h"
#include "ring.h"

namespace stallscope {

enum class SlotState : int { kFree = 0, kClaiming = 1, kOwned = 2, kRetired = 3 };

struct ThreadSlot {
  std::atomic<int> state{static_cast<int>(SlotState::kFree)};
  int32_t tid = 0;  // OS thread id of the owner
  char thread_name[16] = {};
  uint64_t pushed_base = 0;   // ring.pushed() when stats were last reset
  uint64_t dropped_base = 0;  // ring.dropped() when stats were last reset
  Ring ring;
};

struct ThreadStats {
  int32_t tid;
  std::string thread_name;
  uint64_t recorded;  // events accepted into the ring since the last stats reset
  uint64_t dropped;   // events dropped because the ring was full
  uint64_t buffered;  // events in the ring, not drained yet
  bool live;          // the thread still owns its slot
};

class ThreadRegistry {
 public:
  ThreadRegistry() = default;
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  // Allocates the pool: max_threads rings of ring_capacity records (rounded up to a power
  // of two). Must be called while recording is disabled. Returns false on allocation failure.
  bool configure(uint32_t max_threads, uint64_t ring_capacity);
  bool configured() const noexcept { return slots_ != nullptr; }
  uint32_t max_threads() const noexcept { return num_slots_; }
  uint64_t ring_capacity() const noexcept { return ring_capacity_; }

  void set_enabled(bool on) noexcept { enabled_.store(on, std::memory_order_release); }
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }

  // The calling thread's ring, claiming a slot if needed; nullptr when the pool is full
  // (the event is then counted in no_slot_drops()).
  Ring* ring_for_current_thread() noexcept;

  ThreadSlot* slots() noexcept { return slots_; }
  uint32_t num_slots() const noexcept { return num_slots_; }

  // Slot released by an exiting thread: the collector frees it once it has drained it.
  void retire(ThreadSlot* slot) noexcept;
  // Collector: move a drained retired slot back to the free list, keeping its counts.
  void recycle_if_drained(ThreadSlot* slot);

  std::vector<ThreadStats> stats();
  void reset_stats();
  uint64_t no_slot_drops() const noexcept { return no_slot_drops_.load(std::memory_order_relaxed); }
  void count_no_slot_drop() noexcept { no_slot_drops_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t generation() const noexcept { return generation_.load(std::memory_order_relaxed); }

  // In a child after fork(): recording off, every slot free and empty, thread-local claims void.
  void reset_after_fork() noexcept;

 private:
  Ring* claim(uint64_t gen) noexcept;

  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> generation_{1};  // bumped by configure() and fork: invalidates claims
  ThreadSlot* slots_ = nullptr;
  void* pool_ = nullptr;  // ring storage of all slots (mmap)
  size_t pool_bytes_ = 0;
  uint32_t num_slots_ = 0;
  uint64_t ring_capacity_ = 0;
  std::atomic<uint64_t> no_slot_drops_{0};
  std::vector<ThreadStats> retired_stats_;  // counts of threads whose slots were recycled
  // Earlier pools' slots, never freed: a thread that raced past a reconfiguration may still
  // hold a ring in them. Chained from here (plain pointers, which outlive the registry's own
  // destruction at exit) rather than dropped, so that leak checkers see them reachable.
  struct OldSlots {
    ThreadSlot* slots;
    OldSlots* next;
  };
  OldSlots* old_slots_ = nullptr;
};

// Registers the pthread_atfork child handler (fork_handler.cc); idempotent.
void install_fork_handler() noexcept;

// The process's registry (one per process, never destroyed).
extern ThreadRegistry g_registry;

}  // namespace stallscope
