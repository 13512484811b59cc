// The rank-local part of the stall table in one pass per rank over plain columns: the step
// windows, every window's time per category with each collective taken as transfer, and the
// exposed communication (the comm segments that no compute covers). The rules are documented
// where the result is used: python/stallscope/analysis/stall/_table.py (the categories),
// _exposed.py (the local parts) and _native.py (what this pass covers). The Polars
// implementation there is the reference; the tests hold the two equal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analysis {

// Labels: the stall categories claimed by intervals, in priority order (0 wins).
inline constexpr int kStallLabels = 8;  // compute, memcpy, sync_wait, network, ... data
inline constexpr int8_t kLabelCompute = 0;
inline constexpr int8_t kLabelNetwork = 3;
inline constexpr int8_t kLabelInterconnect = 4;
inline constexpr int8_t kCommTransfer = 100;  // network or interconnect by the rank's nodes

// One rank's alignment onto rank 0's clock: aligned = t + rint(o_a + slope * (t_start - t_a)),
// the shift taken from the row's start and added to start and end.
struct RankClock {
  int32_t rank;
  int64_t t_a;
  int64_t o_a;
  double slope;
};

struct StallSweepIn {
  size_t n = 0;                       // rows (none with a null rank, kind, start or end)
  const uint8_t* kind = nullptr;      // kind code (_schema.KINDS position)
  const uint8_t* category = nullptr;  // category code; n_codes - 1 for a null category
  const int32_t* rank = nullptr;
  const int64_t* start = nullptr;  // ns, on the rank's clock
  const int64_t* end = nullptr;
  const int32_t* lane = nullptr;       // a null lane as 0
  const int64_t* corr = nullptr;       // a null correlation as 0
  const uint8_t* corr_null = nullptr;  // 1 where the correlation is null; nullptr: none
  const int8_t* labels_cpu = nullptr;  // label by kind * n_codes + category (CPU runs)
  const int8_t* labels_gpu = nullptr;  // the same for GPU runs
  const uint8_t* gpu_kind = nullptr;   // per kind code: GPU activity
  size_t n_kinds = 0;
  size_t n_codes = 0;
  uint8_t step_kind = 0;
  uint8_t bucket_kind = 0;  // comm rows of other kinds are collective / p2p calls
  // The comm rows (collective, p2p, bucket), ascending row numbers, with their details' facts.
  size_t n_comm = 0;
  const int64_t* comm_row = nullptr;
  const int32_t* comm_nnodes = nullptr;  // nodes the group spans (1 when not said)
  const uint8_t* comm_async = nullptr;   // detail async=1
  const uint8_t* comm_last = nullptr;    // detail last=1 (a backward's last bucket)
  std::vector<RankClock> clocks;         // ranks without one are not moved
  bool gpu = false;                      // taken as a GPU run even without GPU rows
  std::vector<int32_t> multi;            // ranks taken as spanning nodes
};

struct StallSweepOut {
  bool gpu = false;            // taken as a GPU run
  std::vector<int32_t> multi;  // ranks with a collective spanning nodes (and `multi`), sorted
  std::vector<int32_t> ranks;  // the ranks of the rows, sorted
  size_t windows = 0;          // step windows over all ranks
  // The local table, a row per window: sorted by rank, then step (a null step first).
  std::vector<int32_t> rank;
  std::vector<int64_t> step;  // 0 where null
  std::vector<uint8_t> step_null;
  std::vector<int64_t> start, end;
  std::vector<int64_t> sums[kStallLabels];  // ns per category
  // The exposed communication: sorted by rank, then start.
  std::vector<int32_t> x_rank;
  std::vector<int64_t> x_step_start, x_start, x_end;
  std::vector<uint8_t> x_network;
};

// Throws std::invalid_argument for codes outside the tables, and where prepare() raises
// (a negative rank, or ranks times the run's span beyond 2**62 ns).
StallSweepOut stall_sweep(const StallSweepIn& in);

}  // namespace stallscope::analysis
