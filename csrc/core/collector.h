// Drains every thread's ring into column chunks (structure of arrays), the layout the
// Parquet writer and Polars take without another copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "event_record.h"

namespace stallscope {

// One column of a chunk: n values, left uninitialised by resize() (the drain writes every one;
// a std::vector would zero-fill the whole chunk first, a second pass over the memory).
template <class T>
class Column {
 public:
  void resize(size_t n) {
    data_.reset(new T[n]);  // default-initialised: no zeroing
    size_ = n;
  }
  T* data() noexcept { return data_.get(); }
  size_t size() const noexcept { return size_; }
  T& operator[](size_t i) noexcept { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

struct ColumnChunk {
  Column<int64_t> start_ns;
  Column<int64_t> end_ns;
  Column<int64_t> correlation;
  Column<int64_t> bytes;
  Column<uint32_t> name_id;
  Column<uint32_t> detail_id;
  Column<int32_t> lane;
  Column<int16_t> device;
  Column<uint8_t> kind;
  Column<uint8_t> category;

  size_t size() const noexcept { return start_ns.size(); }
  void resize(size_t n);
};

class Collector {
 public:
  // Moves up to max_events buffered events (all rings, oldest first per ring) into a new chunk.
  // Safe to call while threads record; one drain at a time (serialised by a lock, off the
  // recording path).
  static ColumnChunk drain(uint64_t max_events);
  // Total events buffered in all rings now.
  static uint64_t buffered();
  // Drops every buffered event (used at start, for leftovers of an earlier trace); returns how
  // many.
  static uint64_t discard();
  static std::mutex& lock();
};

}  // namespace stallscope
