#include "analysis/hta_rows.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace stallscope::analysis {

namespace {

// (rank, correlation) -> an int32 value, for a set of keys known up front (HTA joins CPU and
// GPU rows on correlation, per rank). Correlation ids grow with time, so where each rank's keys
// fill their range densely enough the table is an array per rank indexed by correlation: rows
// then touch it in about the order it is laid out (a hash scatters them: a cache miss per
// lookup, which made up most of this pass's time on the V100 trace with a hash alone). Other
// keys go to an open-addressing hash table.
class CorrTable {
 public:
  static constexpr int32_t kNone = std::numeric_limits<int32_t>::min();  // no value

  using Key = std::pair<int32_t, int64_t>;  // rank, correlation

  // The keys: key(j) for each j of `rows`.
  template <typename KeyOf>
  CorrTable(const std::vector<uint32_t>& rows, KeyOf key) {
    size_t cur = kAbsent;  // the span of the last key's rank (keys come by rank)
    for (uint32_t j : rows) {
      const auto [rank, corr] = key(j);
      if (corr == kNoCorr) continue;  // in none_: kept out of the ranges
      if (cur == kAbsent || spans_[cur].rank != rank) {
        auto [it, fresh] = span_of_.emplace(rank, spans_.size());
        if (fresh) spans_.push_back(Span{rank, corr, corr, 0});
        cur = it->second;
      }
      spans_[cur].lo = std::min(spans_[cur].lo, corr);
      spans_[cur].hi = std::max(spans_[cur].hi, corr);
    }
    size_t total = 0;
    bool dense = true;
    for (Span& sp : spans_) {
      const auto width = static_cast<uint64_t>(sp.hi) - static_cast<uint64_t>(sp.lo);
      dense = dense && width < kMaxWidth;
      sp.offset = total;
      total += dense ? static_cast<size_t>(width) + 1 : 0;
    }
    if (dense && total <= 16 * rows.size() + 4096) {
      values_.assign(total, kNone);
    } else {
      spans_.clear();
      span_of_.clear();
      size_t cap = 16;
      while (cap < 2 * rows.size()) cap <<= 1;
      slots_.resize(cap);
    }
  }

  // The value of a key given to the constructor (kNone until set).
  int32_t& at(Key k) {
    const auto [rank, corr] = k;
    if (corr == kNoCorr) return none_of(rank);
    if (slots_.empty()) return values_[direct(rank, corr)];
    Slot& s = slots_[slot_of(rank, corr)];
    if (s.value == kNone) {
      s.rank = rank;
      s.corr = corr;
    }
    return s.value;
  }

  // The value of any key: kNone when it has none.
  int32_t get(Key k) {
    const auto [rank, corr] = k;
    if (corr == kNoCorr) return none_of(rank);
    if (slots_.empty()) {
      const size_t i = direct(rank, corr);
      return i == kAbsent ? kNone : values_[i];
    }
    return slots_[slot_of(rank, corr)].value;
  }

 private:
  static constexpr uint64_t kMaxWidth = uint64_t{1} << 32;
  static constexpr size_t kAbsent = std::numeric_limits<size_t>::max();

  struct Span {
    int32_t rank;
    int64_t lo, hi;  // the rank's least and greatest key
    size_t offset;   // of its values in values_
  };
  struct Slot {
    int64_t corr = 0;
    int32_t rank = 0;
    int32_t value = kNone;  // kNone: empty
  };

  // Position of the key in values_, kAbsent outside every rank's range.
  size_t direct(int32_t rank, int64_t corr) {
    if (last_ >= spans_.size() || spans_[last_].rank != rank) {
      auto it = span_of_.find(rank);
      if (it == span_of_.end()) return kAbsent;
      last_ = it->second;
    }
    const Span& sp = spans_[last_];
    if (corr < sp.lo || corr > sp.hi) return kAbsent;
    return sp.offset +
           static_cast<size_t>(static_cast<uint64_t>(corr) - static_cast<uint64_t>(sp.lo));
  }

  // The key's slot, or the empty slot where it would go (the table never fills: 2x the keys).
  size_t slot_of(int32_t rank, int64_t corr) const {
    uint64_t h = static_cast<uint64_t>(corr) * 0x9E3779B97F4A7C15ULL ^
                 static_cast<uint64_t>(static_cast<uint32_t>(rank)) * 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.value == kNone || (s.corr == corr && s.rank == rank)) return i;
    }
  }

  // The key "no correlation" (-1, which HTA's merge matches with itself) per rank, apart: the
  // rows without one (every CPU op) would otherwise stretch a rank's range from -1 to its
  // correlations (on the A100 trace, 0.9 M slots for 34 k keys: 3.7 MB to clear).
  static constexpr int64_t kNoCorr = -1;
  std::unordered_map<int32_t, int32_t> none_;
  // The value of a rank's key "no correlation" (made kNone on first use), the last rank's kept
  // at hand: most rows have none (every CPU op), and they come by rank. A node's value stays
  // where it is while the map grows.
  int32_t& none_of(int32_t rank) {
    if (none_last_ == nullptr || none_rank_ != rank) {
      none_rank_ = rank;
      none_last_ = &none_.try_emplace(rank, kNone).first->second;
    }
    return *none_last_;
  }
  int32_t none_rank_ = 0;
  int32_t* none_last_ = nullptr;
  std::unordered_map<int32_t, size_t> span_of_;  // rank -> its span
  std::vector<Span> spans_;                      // direct mode: one per rank, in first-seen order
  std::vector<int32_t> values_;                  // direct mode
  std::vector<Slot> slots_;                      // hash mode (empty in direct mode)
  size_t last_ = 0;  // the span of the last rank looked up (rows come by rank)
};

// a // 1000 as Python floors it (toward minus infinity).
int64_t floor_div_1000(int64_t a) {
  int64_t q = a / 1000;
  return (a % 1000 < 0) ? q - 1 : q;
}

// HTA's (ts, end) in µs from ns since the trace's base and a duration in ns. Float traces: the
// parsed float ceiled, and floor(ts + dur) (both from the same correctly rounded doubles that
// NumPy's IEEE division gives). Integer traces: the integer µs and ts + dur.
std::pair<double, double> hta_times(int64_t ns_rel, int64_t dur_ns, bool ts_float) {
  const double dur = static_cast<double>(dur_ns) / 1000.0;
  if (ts_float) {
    const double rel = static_cast<double>(ns_rel) / 1000.0;
    return {std::ceil(rel), std::floor(rel + dur)};
  }
  const auto rel = static_cast<double>(floor_div_1000(ns_rel));
  return {rel, rel + dur};
}

// Rank -> its fact, with the last rank's answer cached (rows come grouped by rank).
class FactOf {
 public:
  explicit FactOf(const std::vector<HtaRankFact>& facts) : facts_(facts) {}
  const HtaRankFact* operator()(int32_t rank) {
    if (!cached_ || rank != last_rank_) {
      cached_ = true;
      last_rank_ = rank;
      last_ = nullptr;
      for (const HtaRankFact& f : facts_) {
        if (f.rank == rank) {
          last_ = &f;
          break;
        }
      }
    }
    return last_;
  }

 private:
  const std::vector<HtaRankFact>& facts_;
  bool cached_ = false;
  int32_t last_rank_ = 0;
  const HtaRankFact* last_ = nullptr;
};

// The HTA rows in the making: which input rows they are, and what choosing and ordering them
// needs (kept small: the outputs are written once, in their final order).
struct Work {
  const HtaRowsIn& in;
  std::vector<uint32_t> pos;   // HTA row -> input row
  std::vector<double> ts;      // HTA row -> its ts (µs, shifted)
  std::vector<uint8_t> flags;  // HTA row -> kGpu | kStep
  static constexpr uint8_t kGpu = 1, kStep = 2;

  int32_t rank(size_t j) const { return in.rank[pos[j]]; }
  bool gpu(size_t j) const { return (flags[j] & kGpu) != 0; }
  int64_t stream(uint32_t i) const { return in.gpu_kind[in.kind[i]] ? in.lane[i] : -1; }
  // The correlation HTA sees: GPU rows' and runtime calls' when not 0, else -1.
  int64_t corr_of(uint32_t i) const {
    const uint8_t k = in.kind[i];
    return ((in.gpu_kind[k] || k == in.runtime_kind) && in.corr[i] != 0) ? in.corr[i] : -1;
  }
  // The join key of HTA row j: its rank and correlation.
  CorrTable::Key key(size_t j) const { return {rank(j), corr_of(pos[j])}; }
};

// HTA's last-step filter: the HTA rows it keeps, in its order. CPU rows before their rank's
// last ProfilerStep (ranks without one keep none); GPU rows matching kept CPU rows by (rank,
// correlation), one copy per match (HTA's inner merge; -1 matches -1), GPU rows first, each
// part in row order. gpu_only: only the rows with a stream among them.
std::vector<uint32_t> last_step_rows(const Work& w, bool gpu_only) {
  const size_t m = w.pos.size();
  std::unordered_map<int32_t, double> limit;  // rank -> ts of its last step
  for (size_t j = 0; j < m; ++j) {
    if ((w.flags[j] & Work::kStep) && !w.gpu(j)) {
      auto [it, fresh] = limit.emplace(w.rank(j), w.ts[j]);
      if (!fresh) it->second = std::max(it->second, w.ts[j]);
    }
  }
  std::vector<uint32_t> cpu_kept;
  cpu_kept.reserve(m);  // untouched beyond what is kept
  int32_t cached_rank = 0;
  double cached_limit = -std::numeric_limits<double>::infinity();
  bool cached = false;
  for (size_t j = 0; j < m; ++j) {
    if (w.gpu(j)) continue;
    if (!cached || w.rank(j) != cached_rank) {
      cached = true;
      cached_rank = w.rank(j);
      auto it = limit.find(cached_rank);
      cached_limit = it == limit.end() ? -std::numeric_limits<double>::infinity() : it->second;
    }
    if (w.ts[j] < cached_limit) cpu_kept.push_back(static_cast<uint32_t>(j));
  }
  CorrTable count(cpu_kept, [&w](uint32_t j) { return w.key(j); });
  for (uint32_t j : cpu_kept) {
    int32_t& c = count.at(w.key(j));
    c = c == CorrTable::kNone ? 1 : c + 1;
  }
  const auto wanted = [&w, gpu_only](uint32_t j) { return !gpu_only || w.stream(w.pos[j]) >= 0; };
  std::vector<uint32_t> sel;
  for (size_t j = 0; j < m; ++j) {
    if (!w.gpu(j) || !wanted(static_cast<uint32_t>(j))) continue;
    const int32_t c = count.get(w.key(j));
    if (c != CorrTable::kNone) {
      sel.insert(sel.end(), static_cast<size_t>(c), static_cast<uint32_t>(j));
    }
  }
  std::copy_if(cpu_kept.begin(), cpu_kept.end(), std::back_inserter(sel), wanted);
  return sel;
}

}  // namespace

HtaRowsOut hta_rows(const HtaRowsIn& in) {
  Work w{in, {}, {}, {}};
  w.pos.reserve(in.n);  // reserved, not touched: only the HTA rows' part is written
  for (size_t i = 0; i < in.n; ++i) {
    if (in.kind[i] >= in.n_kinds) {
      throw std::invalid_argument("hta_rows: kind code " + std::to_string(in.kind[i]) +
                                  " outside the kind tables");
    }
    if (in.name[i] >= in.n_names) {
      throw std::invalid_argument("hta_rows: name code " + std::to_string(in.name[i]) +
                                  " outside the name tables");
    }
    if (in.hta_kind[in.kind[i]]) w.pos.push_back(static_cast<uint32_t>(i));
  }
  const size_t m = w.pos.size();
  if (m > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw std::invalid_argument("hta_rows: more than 2^31 - 1 HTA rows");
  }
  HtaRowsOut o;
  if (m == 0) return o;
  // Each row's ts, whether HTA counts it a GPU row, whether it is a ProfilerStep.
  w.ts.resize(m);
  w.flags.resize(m);
  FactOf fact_of(in.facts);
  auto times = [&](uint32_t i) {
    const HtaRankFact* f = fact_of(in.rank[i]);
    return hta_times(in.start[i] - (f != nullptr ? f->base_ns : 0), in.end[i] - in.start[i],
                     f != nullptr ? f->ts_float : true);
  };
  double shift = std::numeric_limits<double>::infinity();
  std::vector<uint32_t> cpu_linked;  // CPU rows with a correlation
  for (size_t j = 0; j < m; ++j) {
    const uint32_t i = w.pos[j];
    const int64_t c = w.corr_of(i);
    const bool gpu = (w.stream(i) >= 0 && c >= 0) || in.name_sync[in.name[i]] != 0;
    w.flags[j] =
        static_cast<uint8_t>((gpu ? Work::kGpu : 0) | (in.name_step[in.name[i]] ? Work::kStep : 0));
    if (!gpu && c != -1) cpu_linked.push_back(static_cast<uint32_t>(j));
    w.ts[j] = times(i).first;
    shift = std::min(shift, w.ts[j]);
  }
  for (double& t : w.ts) t -= shift;
  // Which rows, in which order: all once, or the last-step filter's choice.
  std::vector<uint32_t> sel;
  bool filtered = false;
  if (!in.include_last_step) {
    std::vector<uint8_t> seen(in.n_names);
    size_t step_names = 0;
    for (size_t j = 0; j < m && step_names < 2; ++j) {
      const uint32_t nm = in.name[w.pos[j]];
      if ((w.flags[j] & Work::kStep) && !seen[nm]) {
        seen[nm] = 1;
        ++step_names;
      }
    }
    filtered = step_names >= 2;
    if (filtered) sel = last_step_rows(w, in.gpu_only);
  }
  // Each GPU row's launch: the aligned ts of the last CPU row (in row order) with its rank and
  // correlation. Without one but with a correlation: HTA's index_correlation 0 reads the file's
  // first row (when HTA kept it).
  CorrTable last_cpu(cpu_linked, [&w](uint32_t j) { return w.key(j); });
  for (uint32_t j : cpu_linked) last_cpu.at(w.key(j)) = static_cast<int32_t>(j);
  std::unordered_map<int32_t, double> row0_ts;
  for (const HtaRankFact& f : in.facts) {
    if (f.has_row0) {
      row0_ts[f.rank] = hta_times(f.row0_ns - f.base_ns, 0, f.ts_float).first - shift;
    }
  }
  if (in.gpu_only && !filtered) {  // the rows with a stream, in their order
    for (uint32_t j = 0; j < m; ++j) {
      if (w.stream(w.pos[j]) >= 0) sel.push_back(j);
    }
    filtered = true;
  }
  const size_t k = filtered ? sel.size() : m;
  o.row.resize(k);
  o.rank.resize(k);
  o.kind.resize(k);
  o.name.resize(k);
  o.stream.resize(k);
  o.corr.resize(k);
  o.is_gpu.resize(k);
  o.ts.resize(k);
  o.end.resize(k);
  o.runtime.resize(k);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (size_t q = 0; q < k; ++q) {
    const uint32_t j = filtered ? sel[q] : static_cast<uint32_t>(q);
    const uint32_t i = w.pos[j];
    const int32_t r = in.rank[i];
    const int64_t c = w.corr_of(i);
    o.row[q] = i;
    o.rank[q] = r;
    o.kind[q] = in.kind[i];
    o.name[q] = in.name[i];
    o.stream[q] = w.stream(i);
    o.corr[q] = c;
    o.is_gpu[q] = w.gpu(j);
    o.ts[q] = w.ts[j];
    o.end[q] = times(i).second - shift;
    double launch = kNaN;
    if (w.gpu(j)) {
      if (const int32_t p = last_cpu.get({r, c}); p != CorrTable::kNone) {
        launch = w.ts[static_cast<size_t>(p)];
      } else if (c >= 0) {
        if (auto it = row0_ts.find(r); it != row0_ts.end()) launch = it->second;
      }
    }
    o.runtime[q] = launch;
  }
  return o;
}

}  // namespace stallscope::analysis
