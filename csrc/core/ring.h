// A single-producer single-consumer ring of EventRecords. The producer is the recording
// thread; the consumer is the collector. push() never blocks, allocates or locks: a full ring
// drops the event and counts the drop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "event_record.h"

namespace stallscope {

class Ring {
 public:
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // storage: capacity records, capacity a power of two. The ring does not own it.
  void attach(EventRecord* storage, uint64_t capacity) noexcept {
    slots_ = storage;
    capacity_ = capacity;
    mask_ = capacity - 1;
    reset();
  }

  // Empties the ring and zeroes its counters. Only while neither side is running.
  void reset() noexcept {
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    cached_tail_ = 0;
    dropped_.store(0, std::memory_order_relaxed);
  }

  // Producer side. Returns false (and counts a drop) when the ring is full.
  bool push(const EventRecord& e) noexcept {
    const uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - cached_tail_ >= capacity_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (h - cached_tail_ >= capacity_) {
        // Only the producer writes dropped_: a relaxed load + store is enough.
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[h & mask_] = e;
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  // Consumer side: calls sink(first, n) for up to max records in at most two contiguous
  // spans, then releases them. Returns the number consumed.
  template <class Sink>
  uint64_t consume(uint64_t max, Sink&& sink) noexcept {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    const uint64_t h = head_.load(std::memory_order_acquire);
    uint64_t n = h - t;
    if (n > max) n = max;
    if (n == 0) return 0;
    const uint64_t first = t & mask_;
    const uint64_t span1 = (first + n <= capacity_) ? n : capacity_ - first;
    sink(slots_ + first, span1);
    if (span1 < n) sink(slots_, n - span1);
    tail_.store(t + n, std::memory_order_release);
    return n;
  }

  uint64_t size() const noexcept {
    return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
  }
  uint64_t capacity() const noexcept { return capacity_; }
  // Records accepted since reset(): head_ only grows.
  uint64_t pushed() const noexcept { return head_.load(std::memory_order_relaxed); }
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  // Producer-owned line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer's last view of tail_, saves a shared-line read per push
  std::atomic<uint64_t> dropped_{0};
  // Consumer-owned line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  // Read-only after attach().
  alignas(64) EventRecord* slots_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace stallscope
