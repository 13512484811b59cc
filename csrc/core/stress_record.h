// A multi-threaded recorder for the capture core's stress tests and benchmarks: threads that
// record through the ordinary recording path (record()) as fast as they can.
#pragma once

#include <cstdint>
#include <vector>

namespace stallscope {

struct StressResult {
  std::vector<int64_t> elapsed_ns;  // per thread: ns of its recording loop alone
  std::vector<uint64_t> accepted;   // per thread: events record() accepted
};

// `threads` threads each record n events (correlation = 0..n-1, lane = the thread's index,
// name_id, host device, kind region). With read_clock each event's start and end are the
// process clock; otherwise start = i, end = i + 1 (no clock read: the ring's cost alone). All
// threads start together and none exits before all have finished, so they hold their ring
// slots at the same time.
StressResult stress_record(int threads, uint64_t n, uint32_t name_id, bool read_clock);

}  // namespace stallscope
