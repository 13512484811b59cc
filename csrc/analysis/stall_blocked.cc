#include "analysis/stall_blocked.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace stallscope::analysis {

namespace {

// The spans of communication in flight per thread: the comm rows with end > start merged
// (touching ones merge), sorted by lane, then start.
std::vector<SweepRegion> in_flight(const std::vector<SweepComm>& comm) {
  std::vector<SweepRegion> real;
  for (const SweepComm& c : comm) {
    if (c.e > c.s) real.push_back({c.lane, c.s, c.e});
  }
  std::sort(real.begin(), real.end(), [](const SweepRegion& a, const SweepRegion& b) {
    return std::tie(a.lane, a.s) < std::tie(b.lane, b.s);
  });
  std::vector<SweepRegion> spans;
  for (const SweepRegion& r : real) {
    if (!spans.empty() && spans.back().lane == r.lane && r.s <= spans.back().e) {
      spans.back().e = std::max(spans.back().e, r.e);
    } else {
      spans.push_back(r);
    }
  }
  return spans;
}

// When threads are blocked (lane, start, end; only non-empty ones): synchronous calls, and
// DDP's wait for the gradient all-reduces from each backward's last bucket.
std::vector<SweepRegion> blocked_spans(const std::vector<SweepComm>& comm,
                                       const std::vector<SweepWindow>& windows) {
  std::vector<SweepRegion> out;
  for (const SweepComm& c : comm) {
    if (!c.bucket && !c.async && c.e > c.s) out.push_back({c.lane, c.s, c.e});
  }
  // The instants the gradients were ready (lane, t): buckets flagged last, and the latest
  // bucket start of each lane and step number (the step of the window holding the start: the
  // last window starting at or before it, when it ends after it).
  std::vector<std::pair<int32_t, int64_t>> ready;
  std::map<std::pair<int32_t, int64_t>, int64_t> latest;
  for (const SweepComm& c : comm) {
    if (!c.bucket) continue;
    if (c.last) ready.emplace_back(c.lane, c.s);
    auto it = std::upper_bound(windows.begin(), windows.end(), c.s,
                               [](int64_t t, const SweepWindow& w) { return t < w.s; });
    if (it == windows.begin()) continue;
    const SweepWindow& w = *(it - 1);
    if (c.s >= w.e || w.step_null) continue;
    auto [at, fresh] = latest.try_emplace({c.lane, w.step}, c.s);
    if (!fresh) at->second = std::max(at->second, c.s);
  }
  for (const auto& [key, t] : latest) ready.emplace_back(key.first, t);
  std::sort(ready.begin(), ready.end());
  ready.erase(std::unique(ready.begin(), ready.end()), ready.end());
  if (ready.empty()) return out;
  const std::vector<SweepRegion> spans = in_flight(comm);
  for (const auto& [lane, t] : ready) {
    // the last span of the lane starting at or before t
    auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(lane, t),
                               [](const std::pair<int32_t, int64_t>& k, const SweepRegion& s) {
                                 return k < std::make_pair(s.lane, s.s);
                               });
    if (it == spans.begin()) continue;
    const SweepRegion& sp = *(it - 1);
    if (sp.lane == lane && sp.e > t) out.push_back({lane, t, sp.e});
  }
  return out;
}

struct Edge {
  int64_t t;
  int32_t dc;  // compute regions starting (+1) / ending (-1)
  int32_t db;  // blocked spans starting / ending
};

}  // namespace

void cpu_compute(const std::vector<SweepRegion>& regions, const std::vector<SweepComm>& comm,
                 const std::vector<SweepWindow>& windows,
                 std::vector<std::pair<int64_t, int64_t>>& out) {
  const std::vector<SweepRegion> blocked =
      comm.empty() ? std::vector<SweepRegion>{} : blocked_spans(comm, windows);
  std::vector<int32_t> lanes;
  for (const SweepRegion& b : blocked) lanes.push_back(b.lane);
  std::sort(lanes.begin(), lanes.end());
  lanes.erase(std::unique(lanes.begin(), lanes.end()), lanes.end());
  auto hit = [&](int32_t lane) { return std::binary_search(lanes.begin(), lanes.end(), lane); };
  for (const SweepRegion& r : regions) {
    if (!hit(r.lane)) out.emplace_back(r.s, r.e);
  }
  // Per blocked lane: where at least one compute region and no blocked span is active.
  std::vector<Edge> edges;
  for (int32_t lane : lanes) {
    edges.clear();
    for (const SweepRegion& r : regions) {
      if (r.lane != lane) continue;
      edges.push_back({r.s, 1, 0});
      edges.push_back({r.e, -1, 0});
    }
    for (const SweepRegion& b : blocked) {
      if (b.lane != lane) continue;
      edges.push_back({b.s, 0, 1});
      edges.push_back({b.e, 0, -1});
    }
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
    int64_t c = 0, bl = 0;
    for (size_t i = 0; i < edges.size();) {
      const int64_t t = edges[i].t;
      for (; i < edges.size() && edges[i].t == t; ++i) {
        c += edges[i].dc;
        bl += edges[i].db;
      }
      if (i < edges.size() && c > 0 && bl == 0) out.emplace_back(t, edges[i].t);
    }
  }
}

}  // namespace stallscope::analysis
