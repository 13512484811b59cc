// Sorting arrays that arrive as a few long sorted runs (a capture's events: each stream's in the
// order they ended, one flush after another): the ascending runs are found in one pass, runs
// already in order one after the other count as one, and the rest are merged pairwise, each
// merge moving only the overlap of its two runs element by element (the parts before and after
// it are copied whole).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace stallscope::analysis {

// Sorts `v` by `less` (stable); `buf` and `runs` are scratch space kept between calls.
template <typename T, typename Less>
void run_sort(std::vector<T>& v, std::vector<T>& buf, std::vector<size_t>& runs, Less less) {
  const size_t n = v.size();
  runs.clear();
  runs.push_back(0);
  for (size_t i = 1; i < n; ++i) {
    if (less(v[i], v[i - 1])) runs.push_back(i);
  }
  runs.push_back(n);
  if (runs.size() <= 2) return;
  if (runs.size() > n / 16 + 2) {  // short runs: a merge sort gains nothing from them
    std::stable_sort(v.begin(), v.end(), less);
    return;
  }
  buf.resize(n);
  std::vector<size_t> next;
  while (true) {
    // runs in order one after the other (the next's first not before the last) join
    next.clear();
    next.push_back(0);
    for (size_t k = 1; k + 1 < runs.size(); ++k) {
      if (less(v[runs[k]], v[runs[k] - 1])) next.push_back(runs[k]);
    }
    next.push_back(n);
    runs.swap(next);
    if (runs.size() <= 2) return;
    next.clear();
    next.push_back(0);
    size_t k = 0;
    for (; k + 2 < runs.size(); k += 2) {
      auto a = v.begin() + static_cast<std::ptrdiff_t>(runs[k]);
      auto b = v.begin() + static_cast<std::ptrdiff_t>(runs[k + 1]);
      auto c = v.begin() + static_cast<std::ptrdiff_t>(runs[k + 2]);
      auto out = buf.begin() + static_cast<std::ptrdiff_t>(runs[k]);
      // [a, lo) comes before all of [b, c), [hi, c) after all of [a, b): copied whole
      auto lo = std::upper_bound(a, b, *b, less);
      auto hi = std::lower_bound(b, c, *(b - 1), less);
      out = std::copy(a, lo, out);
      out = std::merge(lo, b, b, hi, out, less);
      std::copy(hi, c, out);
      next.push_back(runs[k + 2]);
    }
    if (k + 1 < runs.size()) {  // an odd run left: copied as it is
      std::copy(v.begin() + static_cast<std::ptrdiff_t>(runs[k]), v.end(),
                buf.begin() + static_cast<std::ptrdiff_t>(runs[k]));
      next.push_back(n);
    }
    v.swap(buf);
    runs.swap(next);
  }
}

}  // namespace stallscope::analysis
