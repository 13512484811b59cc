// CPU runs of the stall table: one rank's compute regions minus the time their thread is
// blocked on communication (python/stallscope/analysis/stall/_table.py: _blocked and
// _cpu_compute, the reference).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace stallscope::analysis {

struct SweepComm {  // a comm row of the rank
  bool bucket;      // else a collective / p2p call
  bool async;
  bool last;
  int32_t lane;
  int64_t s, e;  // ns, aligned
};

struct SweepWindow {  // a step window of the rank
  int64_t s, e;
  int64_t step;
  bool step_null;
};

struct SweepRegion {
  int32_t lane;
  int64_t s, e;
};

// Appends to `out` the compute intervals of the rank: its compute `regions` (any order) minus,
// on each thread, the time that thread is blocked: its synchronous collective / p2p calls, and
// from the start of a backward's last bucket to the end of the communication then in flight on
// it. `windows` sorted by start (markers of equal start in their order). Intervals may be empty.
void cpu_compute(const std::vector<SweepRegion>& regions, const std::vector<SweepComm>& comm,
                 const std::vector<SweepWindow>& windows,
                 std::vector<std::pair<int64_t, int64_t>>& out);

}  // namespace stallscope::analysis
