// The recording path: what every backend calls to write one event. Never blocks, allocates or
// locks; a full ring or a full thread pool drops the event and counts the drop.
#pragma once

#include <cstdint>

#include "clock.h"
#include "event_record.h"

namespace stallscope {

// Writes e into the calling thread's ring. Returns false when recording is off or the event
// was dropped (counted).
bool record(const EventRecord& e) noexcept;

// True while a trace is recording in this process.
bool recording() noexcept;

// Convenience for host events: lane = this thread's OS id, device = -1.
int32_t current_lane() noexcept;

inline EventRecord host_event(Kind kind, Category cat, uint32_t name_id, int64_t start_ns,
                              int64_t end_ns) noexcept {
  EventRecord e{};
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.name_id = name_id;
  e.lane = current_lane();
  e.device = -1;
  e.kind = static_cast<uint8_t>(kind);
  e.category = static_cast<uint8_t>(cat);
  return e;
}

}  // namespace stallscope
