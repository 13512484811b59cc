#include "analysis/stall_sweep.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "analysis/run_sort.h"
#include "analysis/stall_blocked.h"

namespace stallscope::analysis {

namespace {

using Interval = std::pair<int64_t, int64_t>;

struct Rest {  // a non-compute interval: label 1 .. 7, or kCommTransfer
  int8_t label;
  int64_t s, e;
};

struct Edge {  // a rest interval's start (+1) or end (-1), or a window bound (0)
  int64_t t;
  int8_t label;
  int8_t delta;
};

struct Marker {
  int64_t s, e, corr;
  bool corr_null;
};

// The union of the compute intervals as disjoint sorted intervals (touching ones merged), with
// the length of all before each: measures |U ∩ [a, b)|.
class Merged {
 public:
  void build(std::vector<Interval>& iv) {
    s_.clear();
    e_.clear();
    cum_.clear();
    run_sort(iv, buf_, runs_,
             [](const Interval& a, const Interval& b) { return a.first < b.first; });
    for (const Interval& x : iv) {
      if (!s_.empty() && x.first <= e_.back()) {
        e_.back() = std::max(e_.back(), x.second);
      } else {
        s_.push_back(x.first);
        e_.push_back(x.second);
      }
    }
    cum_.resize(s_.size() + 1, 0);
    for (size_t i = 0; i < s_.size(); ++i) cum_[i + 1] = cum_[i] + (e_[i] - s_[i]);
  }

  // Reads the union at non-decreasing times: each query moves a position forward.
  class Cursor {
   public:
    explicit Cursor(const Merged& m) : m_(m) {}

    // Length of the union before t (t at least the last query's).
    int64_t before(int64_t t) {
      while (k_ < m_.s_.size() && m_.s_[k_] <= t) ++k_;  // k_: intervals starting at or before t
      if (k_ == 0) return 0;
      return m_.cum_[k_ - 1] + std::min(t, m_.e_[k_ - 1]) - m_.s_[k_ - 1];
    }

    // |U ∩ [a, b)|, a at least the last query's time.
    int64_t inside(int64_t a, int64_t b) {
      const int64_t x = before(a);
      return before(b) - x;
    }

    // The parts of [a, b) the union does not cover, by start (a at least the last query's b).
    template <typename Emit>
    void complement(int64_t a, int64_t b, Emit emit) {
      while (j_ < m_.e_.size() && m_.e_[j_] <= a) ++j_;  // the first interval ending after a
      int64_t cur = a;
      for (size_t i = j_; i < m_.s_.size() && m_.s_[i] < b; ++i) {
        if (m_.s_[i] > cur) emit(cur, m_.s_[i]);
        cur = std::max(cur, m_.e_[i]);
      }
      if (cur < b) emit(cur, b);
    }

   private:
    const Merged& m_;
    size_t k_ = 0, j_ = 0;
  };

 private:
  std::vector<int64_t> s_, e_, cum_;
  std::vector<Interval> buf_;
  std::vector<size_t> runs_;
};

// The rows of one rank: a contiguous range, or positions in `idx`.
struct RowSet {
  const int64_t* idx;  // nullptr: rows begin .. end - 1
  size_t begin, end;
  size_t at(size_t k) const { return idx ? static_cast<size_t>(idx[k]) : k; }
};

class Sweeper {
 public:
  Sweeper(const StallSweepIn& in, bool gpu, StallSweepOut& out)
      : in_(in), gpu_(gpu), labels_(gpu ? in.labels_gpu : in.labels_cpu), out_(out) {}

  // One rank's rows and its comm entries (indices into in.comm_*).
  void rank(int32_t rank, const RowSet& rows, const uint32_t* comm, size_t n_comm, bool multi_in) {
    gather(rank, rows);
    bool multi = multi_in;
    comm_.clear();
    for (size_t j = 0; j < n_comm; ++j) {
      const uint32_t c = comm[j];
      const size_t row = static_cast<size_t>(in_.comm_row[c]);
      const bool bucket = in_.kind[row] == in_.bucket_kind;
      const auto [s, e] = aligned(row);
      if (!bucket) {
        const bool net = in_.comm_nnodes[c] > 1;
        multi = multi || net;
        if (e > s) rest_.push_back({net ? kLabelNetwork : kLabelInterconnect, s, e});
      }
      const int32_t lane = in_.lane ? in_.lane[row] : 0;
      comm_.push_back({bucket, in_.comm_async[c] != 0, in_.comm_last[c] != 0, lane, s, e});
    }
    if (multi) out_.multi.push_back(rank);
    for (Rest& r : rest_) {
      if (r.label == kCommTransfer) r.label = multi ? kLabelNetwork : kLabelInterconnect;
    }
    windows();
    out_.windows += win_.size();
    if (win_.empty()) return;
    if (!gpu_) {
      cpu_compute(regions_, comm_, win_, compute_);
      std::erase_if(compute_, [](const Interval& x) { return x.second <= x.first; });
    }
    union_.build(compute_);
    categories(rank);
    table(rank);
  }

 private:
  void set_clock(int32_t rank) {
    clock_ = nullptr;
    for (const RankClock& c : in_.clocks) {
      if (c.rank == rank) {
        clock_ = &c;
        break;
      }
    }
  }

  std::pair<int64_t, int64_t> aligned(size_t row) const {
    const int64_t s = in_.start[row], e = in_.end[row];
    if (!clock_) return {s, e};
    // load()'s arithmetic: float64, o_a + slope * (start - t_a), rounded half to even
    double x = static_cast<double>(s - clock_->t_a);
    x *= clock_->slope;
    x += static_cast<double>(clock_->o_a);
    const auto shift = static_cast<int64_t>(std::nearbyint(x));
    return {s + shift, e + shift};
  }

  void gather(int32_t rank, const RowSet& rows) {
    set_clock(rank);
    markers_.clear();
    compute_.clear();
    regions_.clear();
    rest_.clear();
    const size_t codes = in_.n_codes;
    for (size_t k = rows.begin; k < rows.end; ++k) {
      const size_t row = rows.at(k);
      const uint8_t kind = in_.kind[row];
      const uint8_t cat = in_.category[row];
      if (kind >= in_.n_kinds || cat >= codes) {
        throw std::invalid_argument("stall_sweep: a kind or category code outside the tables");
      }
      const int8_t label = labels_[kind * codes + cat];
      if (kind == in_.step_kind) {
        const auto [s, e] = aligned(row);
        markers_.push_back({s, e, in_.corr[row], in_.corr_null && in_.corr_null[row]});
      }
      if (label < 0) continue;
      const auto [s, e] = aligned(row);
      if (label == kLabelCompute) {
        if (!gpu_) {
          regions_.push_back({in_.lane ? in_.lane[row] : 0, s, e});
        } else if (e > s) {
          compute_.emplace_back(s, e);
        }
      } else if (e > s) {
        rest_.push_back({label, s, e});
      }
    }
  }

  // The step windows (_steps.windows): window k runs from marker k to the next marker, or to
  // the marker's own end when it is a range that ends first; the last marker opens a window
  // only when it is a range.
  void windows() {
    win_.clear();
    std::stable_sort(markers_.begin(), markers_.end(),
                     [](const Marker& a, const Marker& b) { return a.s < b.s; });
    for (size_t i = 0; i < markers_.size(); ++i) {
      const Marker& m = markers_[i];
      const bool ranged = m.e > m.s;
      const bool has_next = i + 1 < markers_.size();
      if (!has_next && !ranged) continue;
      int64_t e = m.e;
      if (has_next) e = ranged ? std::min(markers_[i + 1].s, m.e) : markers_[i + 1].s;
      win_.push_back({m.s, e, m.corr, m.corr_null});
    }
  }

  // The rest cut into segments at every edge and window bound, each with the smallest label
  // active over it; per window, compute = |U ∩ window|, and each segment's length outside U
  // goes to its label. Comm segments' parts outside U are the exposed communication.
  void categories(int32_t rank) {
    // starts, then ends, then window bounds: each in few sorted runs (rows come by lane, in
    // the order they ended)
    edges_.clear();
    for (const Rest& r : rest_) edges_.push_back({r.s, r.label, 1});
    for (const Rest& r : rest_) edges_.push_back({r.e, r.label, -1});
    for (const SweepWindow& w : win_) {
      edges_.push_back({w.s, -1, 0});
      edges_.push_back({w.e, -1, 0});
    }
    run_sort(edges_, edge_buf_, runs_, [](const Edge& a, const Edge& b) { return a.t < b.t; });
    sums_.assign(win_.size() * kStallLabels, 0);
    Merged::Cursor at_window(union_), at_segment(union_), exposed(union_);
    for (size_t w = 0; w < win_.size(); ++w) {  // by start, disjoint but where empty
      sums_[w * kStallLabels] = win_[w].e > win_[w].s ? at_window.inside(win_[w].s, win_[w].e) : 0;
    }
    // the non-empty windows, by start (disjoint)
    open_.clear();
    for (size_t w = 0; w < win_.size(); ++w) {
      if (win_[w].e > win_[w].s) open_.push_back(w);
    }
    int32_t active[kStallLabels] = {};
    size_t wp = 0;
    for (size_t i = 0; i < edges_.size();) {
      const int64_t t = edges_[i].t;
      for (; i < edges_.size() && edges_[i].t == t; ++i) {
        if (edges_[i].delta) active[edges_[i].label] += edges_[i].delta;
      }
      if (i == edges_.size()) break;
      int label = 0;
      while (label < kStallLabels && active[label] <= 0) ++label;
      if (label == kStallLabels) continue;
      const int64_t nxt = edges_[i].t;
      while (wp < open_.size() && win_[open_[wp]].e <= t) ++wp;
      if (wp == open_.size() || win_[open_[wp]].s > t) continue;
      const size_t w = open_[wp];
      sums_[w * kStallLabels + static_cast<size_t>(label)] += (nxt - t) - at_segment.inside(t, nxt);
      if (label == kLabelNetwork || label == kLabelInterconnect) {
        const uint8_t net = label == kLabelNetwork;
        const int64_t ws = win_[w].s;
        exposed.complement(t, nxt, [&](int64_t a, int64_t b) {
          out_.x_rank.push_back(rank);
          out_.x_step_start.push_back(ws);
          out_.x_start.push_back(a);
          out_.x_end.push_back(b);
          out_.x_network.push_back(net);
        });
      }
    }
  }

  // The rank's rows of the table: by step, a null step first, equal steps by start.
  void table(int32_t rank) {
    order_.resize(win_.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      const SweepWindow &x = win_[a], &y = win_[b];
      if (x.step_null != y.step_null) return x.step_null;
      return !x.step_null && x.step < y.step;
    });
    for (size_t w : order_) {
      const SweepWindow& x = win_[w];
      out_.rank.push_back(rank);
      out_.step.push_back(x.step_null ? 0 : x.step);
      out_.step_null.push_back(x.step_null);
      out_.start.push_back(x.s);
      out_.end.push_back(x.e);
      for (int j = 0; j < kStallLabels; ++j) {
        out_.sums[j].push_back(sums_[w * kStallLabels + static_cast<size_t>(j)]);
      }
    }
  }

  const StallSweepIn& in_;
  const bool gpu_;
  const int8_t* labels_;
  StallSweepOut& out_;
  const RankClock* clock_ = nullptr;
  std::vector<Marker> markers_;
  std::vector<SweepWindow> win_;
  std::vector<Interval> compute_;
  std::vector<SweepRegion> regions_;
  std::vector<Rest> rest_;
  std::vector<SweepComm> comm_;
  std::vector<Edge> edges_, edge_buf_;
  std::vector<size_t> runs_;
  std::vector<int64_t> sums_;
  std::vector<size_t> open_, order_;
  Merged union_;
};

struct Group {
  int32_t rank;
  RowSet rows;
};

// The rows grouped by rank, ranks ascending: contiguous runs when each rank's rows are one run
// (a run directory's files), else positions in `idx` (each rank's rows in their order).
std::vector<Group> groups(const StallSweepIn& in, std::vector<int64_t>& idx) {
  std::vector<Group> runs;
  for (size_t i = 0; i < in.n;) {
    size_t j = i + 1;
    while (j < in.n && in.rank[j] == in.rank[i]) ++j;
    runs.push_back({in.rank[i], {nullptr, i, j}});
    i = j;
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Group& a, const Group& b) { return a.rank < b.rank; });
  bool distinct = true;
  for (size_t k = 1; k < runs.size(); ++k) distinct = distinct && runs[k].rank != runs[k - 1].rank;
  if (distinct) return runs;
  std::vector<Group> out;
  for (const Group& g : runs) {
    if (out.empty() || out.back().rank != g.rank) out.push_back({g.rank, {nullptr, 0, 0}});
    out.back().rows.end += g.rows.end - g.rows.begin;  // the rank's row count, for now
  }
  size_t at = 0;
  for (Group& g : out) {
    const size_t count = g.rows.end;
    g.rows = {nullptr, at, at};
    at += count;
  }
  idx.resize(in.n);
  std::unordered_map<int32_t, size_t> slot;
  for (size_t k = 0; k < out.size(); ++k) slot.emplace(out[k].rank, k);
  for (size_t i = 0; i < in.n; ++i) {
    RowSet& r = out[slot.at(in.rank[i])].rows;
    idx[r.end++] = static_cast<int64_t>(i);
  }
  for (Group& g : out) g.rows.idx = idx.data();
  return out;
}

}  // namespace

StallSweepOut stall_sweep(const StallSweepIn& in) {
  StallSweepOut out;
  // Room for the exposed intervals up front (a fraction of the rows; pages are only touched
  // as they fill): growing by copies moved hundreds of MB on a 1,024-rank run.
  const size_t room = in.n / 2;
  out.x_rank.reserve(room);
  out.x_step_start.reserve(room);
  out.x_start.reserve(room);
  out.x_end.reserve(room);
  out.x_network.reserve(room);
  bool gpu = in.gpu;
  for (size_t i = 0; i < in.n && !gpu; ++i) {
    if (in.kind[i] >= in.n_kinds) {
      throw std::invalid_argument("stall_sweep: a kind code outside the tables");
    }
    gpu = in.gpu_kind[in.kind[i]] != 0;
  }
  out.gpu = gpu;
  std::vector<int64_t> idx;
  const std::vector<Group> by_rank = groups(in, idx);
  // each rank's comm entries, in row order
  std::vector<uint32_t> comm(in.n_comm);
  std::iota(comm.begin(), comm.end(), 0u);
  std::vector<size_t> comm_at(by_rank.size() + 1, 0);
  if (in.n_comm) {
    std::unordered_map<int32_t, size_t> slot;
    for (size_t k = 0; k < by_rank.size(); ++k) slot.emplace(by_rank[k].rank, k);
    std::vector<uint32_t> of(in.n_comm);
    for (size_t j = 0; j < in.n_comm; ++j) {
      const int64_t row = in.comm_row[j];
      if (row < 0 || static_cast<size_t>(row) >= in.n) {
        throw std::invalid_argument("stall_sweep: a comm row outside the rows");
      }
      of[j] = static_cast<uint32_t>(slot.at(in.rank[row]));
      ++comm_at[of[j] + 1];
    }
    std::partial_sum(comm_at.begin(), comm_at.end(), comm_at.begin());
    std::vector<size_t> fill(comm_at.begin(), comm_at.end() - 1);
    for (size_t j = 0; j < in.n_comm; ++j) comm[fill[of[j]]++] = static_cast<uint32_t>(j);
  }
  std::vector<int32_t> multi = in.multi;
  std::sort(multi.begin(), multi.end());
  Sweeper sweep(in, gpu, out);
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (size_t k = 0; k < by_rank.size(); ++k) {
    const int32_t r = by_rank[k].rank;
    out.ranks.push_back(r);
    const bool m = std::binary_search(multi.begin(), multi.end(), r);
    const size_t before = out.start.size();
    sweep.rank(r, by_rank[k].rows, comm.data() + comm_at[k], comm_at[k + 1] - comm_at[k], m);
    for (size_t w = before; w < out.start.size(); ++w) {
      lo = std::min(lo, out.start[w]);
      hi = std::max(hi, out.end[w]);
    }
  }
  if (out.windows == 0) {
    out.multi = in.multi;
    return out;
  }
  // prepare()'s check: every rank's steps laid end to end must fit one int64 timeline
  int32_t low = std::numeric_limits<int32_t>::max(), top = std::numeric_limits<int32_t>::min();
  for (int32_t r : out.rank) {
    low = std::min(low, r);
    top = std::max(top, r);
  }
  const __int128 span = static_cast<__int128>(hi) - lo + 1;
  if (low < 0 || (static_cast<__int128>(top) + 1) * span >= (static_cast<__int128>(1) << 62)) {
    throw std::invalid_argument(
        "ranks " + std::to_string(low) + ".." + std::to_string(top) + " over " +
        std::to_string(static_cast<long long>(span)) +
        " ns do not fit one int64 timeline; ranks must be non-negative and the run shorter "
        "than 2**62 / ranks ns");
  }
  for (int32_t r : multi) out.multi.push_back(r);
  std::sort(out.multi.begin(), out.multi.end());
  out.multi.erase(std::unique(out.multi.begin(), out.multi.end()), out.multi.end());
  return out;
}

}  // namespace stallscope::analysis
