// The rank-local stall table's sweep (csrc/analysis/stall_sweep.h) and the sync wait split
// (csrc/analysis/sync_split.h) on hand-built ranks with known answers; the Python tests hold
// them equal to the Polars reference on random events.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "analysis/run_sort.h"
#include "analysis/stall_sweep.h"
#include "analysis/sync_split.h"
#include "check.h"

namespace {

using namespace stallscope::analysis;

// Kind and category codes of this test's own tables: kinds step, kernel, collective, bucket,
// region; categories compute, comm, null (the last code).
enum Kind : uint8_t { kStep, kKernel, kColl, kBucket, kRegion, kKinds };
enum Cat : uint8_t { kCompute, kComm, kNull, kCodes };
constexpr size_t kTable = size_t{kKinds} * size_t{kCodes};

struct Rows {
  std::vector<uint8_t> kind, cat;
  std::vector<int32_t> rank, lane;
  std::vector<int64_t> start, end, corr;
  std::vector<int64_t> comm_row;
  std::vector<int32_t> nnodes;
  std::vector<uint8_t> async, last;

  void add(int32_t r, Kind k, Cat c, int64_t s, int64_t e, int64_t n = 0, int32_t nodes = 1,
           int32_t ln = 0, bool is_last = false) {
    if (k == kColl || k == kBucket) {
      comm_row.push_back(static_cast<int64_t>(kind.size()));
      nnodes.push_back(nodes);
      async.push_back(0);
      last.push_back(is_last);
    }
    kind.push_back(k);
    cat.push_back(c);
    rank.push_back(r);
    lane.push_back(ln);
    start.push_back(s);
    end.push_back(e);
    corr.push_back(n);
  }
};

// label by kind * kCodes + category: GPU runs count kernels (compute) and comm kernels
// (transfer); CPU runs compute regions; nothing else claims time here
const int8_t kGpu[kTable] = {-1, -1, -1, 0, kCommTransfer, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
const int8_t kCpu[kTable] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, -1, -1};
const uint8_t kGpuKind[kKinds] = {0, 1, 0, 0, 0};

StallSweepOut sweep(const Rows& r, bool gpu = false, std::vector<RankClock> clocks = {}) {
  StallSweepIn in;
  in.n = r.kind.size();
  in.kind = r.kind.data();
  in.category = r.cat.data();
  in.rank = r.rank.data();
  in.start = r.start.data();
  in.end = r.end.data();
  in.lane = r.lane.data();
  in.corr = r.corr.data();
  in.labels_cpu = kCpu;
  in.labels_gpu = kGpu;
  in.gpu_kind = kGpuKind;
  in.n_kinds = kKinds;
  in.n_codes = kCodes;
  in.step_kind = kStep;
  in.bucket_kind = kBucket;
  in.n_comm = r.comm_row.size();
  in.comm_row = r.comm_row.data();
  in.comm_nnodes = r.nnodes.data();
  in.comm_async = r.async.data();
  in.comm_last = r.last.data();
  in.gpu = gpu;
  in.clocks = std::move(clocks);
  return stall_sweep(in);
}

TEST(a_gpu_step_splits_into_compute_exposed_network_and_host) {
  Rows r;
  r.add(0, kStep, kNull, 0, 0, 1);
  r.add(0, kStep, kNull, 100, 100, 2);
  r.add(0, kKernel, kCompute, 0, 30);
  r.add(0, kKernel, kCompute, 10, 20);   // inside the first: the union counts it once
  r.add(0, kColl, kComm, 20, 60, 4, 2);  // two nodes: network, exposed from 30
  const StallSweepOut o = sweep(r);
  CHECK(o.gpu);
  REQUIRE(o.rank.size() == 1);
  CHECK_EQ(o.step[0], 1);
  CHECK_EQ(o.sums[kLabelCompute][0], 30);
  CHECK_EQ(o.sums[kLabelNetwork][0], 30);
  CHECK_EQ(o.multi.size(), 1u);
  REQUIRE(o.x_start.size() == 1);
  CHECK_EQ(o.x_start[0], 30);
  CHECK_EQ(o.x_end[0], 60);
  CHECK_EQ(o.x_network[0], 1);
}

TEST(clocks_move_a_rank_onto_rank_zero) {
  Rows r;
  r.add(3, kStep, kNull, 1000, 1000, 7);
  r.add(3, kStep, kNull, 1100, 1100, 8);
  r.add(3, kKernel, kCompute, 1000, 1050);
  // shift = rint(-500 + 0.5 * (start - 1000)), added to start and end
  const StallSweepOut o = sweep(r, false, {{3, 1000, -500, 0.5}});
  REQUIRE(o.start.size() == 1);
  CHECK_EQ(o.start[0], 500);
  CHECK_EQ(o.end[0], 650);  // 1100 + rint(-500 + 50)
  CHECK_EQ(o.sums[kLabelCompute][0], 50);
}

TEST(a_cpu_thread_blocked_in_a_call_does_not_compute) {
  Rows r;
  r.add(0, kStep, kNull, 0, 0, 1);
  r.add(0, kStep, kNull, 100, 100, 2);
  r.add(0, kRegion, kCompute, 0, 80, 0, 1, 5);
  r.add(0, kColl, kComm, 40, 70, 0, 1, 5);  // synchronous, on the region's thread
  const StallSweepOut o = sweep(r);
  CHECK(!o.gpu);
  REQUIRE(o.rank.size() == 1);
  CHECK_EQ(o.sums[kLabelCompute][0], 50);
  CHECK_EQ(o.sums[kLabelInterconnect][0], 30);
}

TEST(interleaved_ranks_come_out_by_rank_and_step) {
  Rows r;
  r.add(1, kStep, kNull, 0, 0, 5);
  r.add(0, kStep, kNull, 0, 0, 9);
  r.add(1, kStep, kNull, 10, 10, 4);
  r.add(0, kStep, kNull, 20, 20, 10);
  r.add(1, kStep, kNull, 30, 30, 6);
  const StallSweepOut o = sweep(r);
  REQUIRE(o.rank.size() == 3);
  CHECK_EQ(o.rank[0], 0);
  CHECK_EQ(o.rank[1], 1);
  CHECK_EQ(o.step[1], 4);  // by step number, not start
  CHECK_EQ(o.step[2], 5);
}

TEST(a_negative_rank_with_steps_is_refused) {
  Rows r;
  r.add(-1, kStep, kNull, 0, 10, 1);
  CHECK_THROWS(sweep(r), std::invalid_argument);
}

TEST(the_split_moves_exposed_time_inside_waits) {
  const std::vector<int32_t> row_rank = {0, 0};
  const std::vector<int64_t> row_start = {0, 100}, row_end = {100, 200};
  const std::vector<int32_t> x_rank = {0, 0, 0};
  const std::vector<int64_t> x_start = {10, 50, 120}, x_end = {30, 90, 150};
  const std::vector<uint8_t> x_net = {1, 0, 1};
  const std::vector<int32_t> w_rank = {0, 0, 1};
  const std::vector<int64_t> w_start = {20, 60, 0}, w_end = {70, 130, 1000};
  SyncSplitIn in;
  in.n_rows = 2;
  in.row_rank = row_rank.data();
  in.row_start = row_start.data();
  in.row_end = row_end.data();
  in.n_exposed = 3;
  in.x_rank = x_rank.data();
  in.x_start = x_start.data();
  in.x_end = x_end.data();
  in.x_network = x_net.data();
  in.n_waits = 3;
  in.w_rank = w_rank.data();
  in.w_start = w_start.data();
  in.w_end = w_end.data();
  const SyncSplitOut o = sync_split(in);
  CHECK_EQ(o.network[0], 10);       // [20, 30)
  CHECK_EQ(o.interconnect[0], 40);  // [50, 90) inside the waits' union [20, 130)
  CHECK_EQ(o.network[1], 10);       // [120, 130)
  CHECK_EQ(o.interconnect[1], 0);
}

TEST(run_sort_sorts_runs_and_anything) {
  std::vector<int64_t> v = {5, 6, 7, 1, 2, 3, 9, 10, 4, 8, 8, 0};
  std::vector<int64_t> buf;
  std::vector<size_t> runs;
  run_sort(v, buf, runs, [](int64_t a, int64_t b) { return a < b; });
  CHECK(v == (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10}));
  std::vector<int64_t> w;
  for (int i = 0; i < 1000; ++i) w.push_back((i * 7919) % 1000 + (i / 100) * 1000);
  run_sort(w, buf, runs, [](int64_t a, int64_t b) { return a < b; });
  bool sorted = true;
  for (size_t i = 1; i < w.size(); ++i) sorted = sorted && w[i - 1] <= w[i];
  CHECK(sorted);
}

}  // namespace
