// Sorting arrays that arrive as a few long sorted runs (a capture's events: each stream's in the
// order they ended, one flush after another): the ascending runs are found in one pass, then
// merged pairwise, log2(runs) linear passes instead of a comparison sort's log2(n).
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
  while (runs.size() > 2) {
    next.clear();
    next.push_back(0);
    size_t k = 0;
    for (; k + 2 < runs.size(); k += 2) {
      std::merge(v.begin() + runs[k], v.begin() + runs[k + 1], v.begin() + runs[k + 1],
                 v.begin() + runs[k + 2], buf.begin() + runs[k], less);
      next.push_back(runs[k + 2]);
    }
    if (k + 1 < runs.size()) {  // an odd run left: copied as it is
      std::copy(v.begin() + runs[k], v.end(), buf.begin() + runs[k]);
      next.push_back(n);
    }
    v.swap(buf);
    runs.swap(next);
  }
}

}  // namespace stallscope::analysis
