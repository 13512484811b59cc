// The cross-rank part of the stall table, per rank: the exposed communication inside the rank's
// waits for the last member of its collectives moves from transfer to sync wait
// (python/stallscope/analysis/stall/_exposed.py: split_sync_wait, the reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analysis {

struct SyncSplitIn {
  // The table's rows (any ranks): rank, window start and end.
  size_t n_rows = 0;
  const int32_t* row_rank = nullptr;
  const int64_t* row_start = nullptr;
  const int64_t* row_end = nullptr;
  // The exposed communication: disjoint per rank, each inside one of the rank's windows.
  size_t n_exposed = 0;
  const int32_t* x_rank = nullptr;
  const int64_t* x_start = nullptr;
  const int64_t* x_end = nullptr;
  const uint8_t* x_network = nullptr;
  // The waits of every rank (others are skipped): non-empty, any order, may overlap.
  size_t n_waits = 0;
  const int32_t* w_rank = nullptr;
  const int64_t* w_start = nullptr;
  const int64_t* w_end = nullptr;
};

struct SyncSplitOut {  // per table row, ns of exposed network / interconnect time in waits
  std::vector<int64_t> network, interconnect;
};

SyncSplitOut sync_split(const SyncSplitIn& in);

}  // namespace stallscope::analysis
