// Drains every thread's ring into column chunks (structure of arrays), the layout the
// Parquet writer and Polars take without another copy.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "event_record.h"

namespace stallscope {

struct ColumnChunk {
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<int64_t> correlation;
  std::vector<int64_t> bytes;
  std::vector<uint32_t> name_id;
  std::vector<uint32_t> detail_id;
  std::vector<int32_t> lane;
  std::vector<int16_t> device;
  std::vector<uint8_t> kind;
  std::vector<uint8_t> category;

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
