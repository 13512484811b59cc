#include "predict/engine_run.h"

#include <algorithm>
#include <vector>

namespace stallscope::predict {

void engine_run(const EngineGraph& g, const int64_t* duration, int64_t* start, int64_t* end,
                int64_t* ready, int64_t* free_at) {
  std::fill(free_at, free_at + g.n_streams, int64_t{0});
  for (int64_t k = 0; k < g.n; ++k) {
    const int32_t i = g.order[k];
    int64_t r = free_at[g.stream[i]];
    for (int64_t d = g.dep_ptr[i]; d < g.dep_ptr[i + 1]; ++d) r = std::max(r, end[g.dep_idx[d]]);
    int64_t s = r;
    for (int64_t w = g.wait_ptr[i]; w < g.wait_ptr[i + 1]; ++w) {
      s = std::max(s, end[g.wait_idx[w]]);
    }
    ready[i] = r;
    start[i] = s;
    end[i] = free_at[g.stream[i]] = s + duration[i];
  }
}

int64_t engine_order(const EngineGraph& g, int32_t* out) {
  const auto n = static_cast<size_t>(g.n);
  std::vector<int32_t> prev(n, -1), last(static_cast<size_t>(g.n_streams), -1);
  std::vector<int64_t> indeg(n, 0), succ_ptr(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = last[g.stream[i]];
    last[g.stream[i]] = static_cast<int32_t>(i);
  }
  auto each_before = [&](size_t i, auto&& f) {
    if (prev[i] >= 0) f(prev[i]);
    for (int64_t d = g.dep_ptr[i]; d < g.dep_ptr[i + 1]; ++d) f(g.dep_idx[d]);
    for (int64_t w = g.wait_ptr[i]; w < g.wait_ptr[i + 1]; ++w) f(g.wait_idx[w]);
  };
  for (size_t i = 0; i < n; ++i) {
    each_before(i, [&](int32_t d) {
      ++succ_ptr[static_cast<size_t>(d) + 1];
      ++indeg[i];
    });
  }
  for (size_t i = 0; i < n; ++i) succ_ptr[i + 1] += succ_ptr[i];
  std::vector<int32_t> succ(static_cast<size_t>(succ_ptr[n]));
  std::vector<int64_t> fill(succ_ptr.begin(), succ_ptr.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    each_before(i,
                [&](int32_t d) { succ[static_cast<size_t>(fill[d]++)] = static_cast<int32_t>(i); });
  }
  std::vector<int32_t> todo;
  for (size_t i = n; i-- > 0;) {
    if (indeg[i] == 0) todo.push_back(static_cast<int32_t>(i));
  }
  int64_t placed = 0;
  while (!todo.empty()) {
    const int32_t i = todo.back();
    todo.pop_back();
    out[placed++] = i;
    for (int64_t k = succ_ptr[i]; k < succ_ptr[i + 1]; ++k) {
      if (--indeg[succ[k]] == 0) todo.push_back(succ[k]);
    }
  }
  return placed;
}

}  // namespace stallscope::predict
