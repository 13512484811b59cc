#include "analysis/sync_split.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace stallscope::analysis {

namespace {

using Interval = std::pair<int64_t, int64_t>;

// Positions 0 .. n - 1 grouped by rank (each group in position order), as rank -> positions.
std::unordered_map<int32_t, std::vector<size_t>> by_rank(const int32_t* rank, size_t n) {
  std::unordered_map<int32_t, std::vector<size_t>> out;
  for (size_t i = 0; i < n; ++i) out[rank[i]].push_back(i);
  return out;
}

}  // namespace

SyncSplitOut sync_split(const SyncSplitIn& in) {
  SyncSplitOut out;
  out.network.assign(in.n_rows, 0);
  out.interconnect.assign(in.n_rows, 0);
  auto rows = by_rank(in.row_rank, in.n_rows);
  std::unordered_map<int32_t, std::vector<Interval>> waits;
  for (const auto& [r, _] : rows) waits.emplace(r, std::vector<Interval>{});
  for (size_t i = 0; i < in.n_waits; ++i) {
    auto it = waits.find(in.w_rank[i]);
    if (it != waits.end()) it->second.emplace_back(in.w_start[i], in.w_end[i]);
  }
  auto exposed = by_rank(in.x_rank, in.n_exposed);
  std::vector<Interval> merged;
  for (auto& [r, x] : exposed) {
    auto rit = rows.find(r);
    if (rit == rows.end()) continue;
    // the rank's non-empty windows by start (disjoint)
    std::vector<size_t>& win = rit->second;
    std::erase_if(win, [&](size_t w) { return in.row_end[w] <= in.row_start[w]; });
    std::sort(win.begin(), win.end(),
              [&](size_t a, size_t b) { return in.row_start[a] < in.row_start[b]; });
    // the union of its waits, touching ones merged
    std::vector<Interval>& w = waits[r];
    std::sort(w.begin(), w.end());
    merged.clear();
    for (const Interval& v : w) {
      if (!merged.empty() && v.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, v.second);
      } else {
        merged.push_back(v);
      }
    }
    if (merged.empty()) continue;
    auto by_start = [&](size_t a, size_t b) { return in.x_start[a] < in.x_start[b]; };
    if (!std::is_sorted(x.begin(), x.end(), by_start)) {
      std::stable_sort(x.begin(), x.end(), by_start);
    }
    size_t wp = 0, mp = 0;
    for (size_t i : x) {
      const int64_t a = in.x_start[i], b = in.x_end[i];
      while (wp < win.size() && in.row_end[win[wp]] <= a) ++wp;
      if (wp == win.size() || in.row_start[win[wp]] > a) continue;  // in no window
      while (mp < merged.size() && merged[mp].second <= a) ++mp;
      int64_t got = 0;
      for (size_t k = mp; k < merged.size() && merged[k].first < b; ++k) {
        got += std::min(b, merged[k].second) - std::max(a, merged[k].first);
      }
      (in.x_network[i] ? out.network : out.interconnect)[win[wp]] += got;
    }
  }
  return out;
}

}  // namespace stallscope::analysis
