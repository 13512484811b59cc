#include "predict/pipeline_graph.h"

#include <algorithm>
#include <initializer_list>
#include <tuple>

namespace stallscope::predict {

namespace {

// The planner's SLOTS, in order (stallscope/plan/_schedule.py).
enum Slot : int32_t {
  kFComp,
  kFTp,
  kBComp,
  kBTp,
  kF,
  kB,
  kEmbedF,
  kEmbedB,
  kLogitsF,
  kLogitsB,
  kSend,
  kZeroAg,
  kZeroRs,
  kDpLayer,
  kDpEmbed,
  kTiedEmbed,
  kOptLayer,
  kOptEmbed,
  kParamAgLayer,
  kParamAgEmbed,
};

constexpr int32_t kMaxPieces = 8;

int32_t pieces_of(int32_t nl) {
  for (int32_t d = std::min(nl, kMaxPieces); d > 1; --d) {
    if (nl % d == 0) return d;
  }
  return 1;
}

struct Op {
  bool backward;
  int32_t chunk, mb;
};

std::vector<Op> stage_order(int32_t pp, int32_t m, int32_t v, int32_t stage) {
  const int32_t total = m * v;
  const int32_t warm =
      v > 1 ? std::min(total, (pp - stage - 1) * 2 + (v - 1) * pp) : std::min(m, pp - stage - 1);
  auto which = [&](int32_t k, bool backward) {
    const int32_t c = (k / pp) % v;
    return Op{backward, backward ? v - 1 - c : c, (k / (pp * v)) * pp + k % pp};
  };
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(2 * total));
  for (int32_t k = 0; k < warm; ++k) ops.push_back(which(k, false));
  for (int32_t j = 0; j < total - warm; ++j) {
    ops.push_back(which(warm + j, false));
    ops.push_back(which(j, true));
  }
  for (int32_t k = total - warm; k < total; ++k) ops.push_back(which(k, true));
  return ops;
}

using Key = std::tuple<bool, int32_t, int32_t, int32_t>;  // (backward, stage, chunk, mb)

}  // namespace

PipelineGraph pipeline_graph(const PipelineShape& sh) {
  const int32_t p = sh.pp, m = sh.micro_batches, v = sh.interleave, nl = sh.layers_per_chunk;
  PipelineGraph g;
  std::vector<std::pair<int32_t, Key>> pending;
  // (phase, stage, chunk, micro-batch) -> its send task
  std::vector<int32_t> sends(static_cast<size_t>(2) * p * v * m, -1);
  const auto slot_of = [&](const Key& key) {
    const auto [b, st, c, i] = key;
    return ((static_cast<size_t>(b) * p + st) * v + c) * m + i;
  };
  const size_t expected =
      static_cast<size_t>(p) * v * m * 2 * (sh.zero3 ? 3 * pieces_of(nl) + 2 : 4);
  g.stream.reserve(expected);
  g.slot.reserve(expected);
  g.mult.reserve(expected);
  g.chunk.reserve(expected);
  int32_t chunk = -1;  // the chunk of the op being added; -1 outside the ops (step-level work)
  g.dep_ptr.reserve(expected + 1);
  g.dep_idx.reserve(expected);
  g.wait.reserve(expected);
  auto add = [&](int32_t stream, int32_t slot, double mult,
                 std::initializer_list<int32_t> deps) -> int32_t {
    g.stream.push_back(stream);
    g.slot.push_back(slot);
    g.mult.push_back(mult);
    g.chunk.push_back(chunk);
    for (int32_t d : deps) g.dep_idx.push_back(d);
    g.dep_ptr.push_back(static_cast<int64_t>(g.dep_idx.size()));
    g.wait.push_back(-1);
    return static_cast<int32_t>(g.stream.size()) - 1;
  };
  for (int32_t s = 0; s < p; ++s) {
    const auto new_stream = [&]() {
      g.stream_class.push_back(s);
      return static_cast<int32_t>(g.stream_class.size()) - 1;
    };
    const int32_t comp = new_stream(), send = new_stream(), dps = new_stream();
    int32_t ag = -1, rs = -1;
    if (sh.zero3) {
      ag = new_stream();
      rs = new_stream();
    }
    const std::vector<Op> order = stage_order(p, m, v, s);
    std::vector<int32_t> last_b(static_cast<size_t>(v), -1);
    for (size_t k = 0; k < order.size(); ++k) {
      if (order[k].backward) last_b[static_cast<size_t>(order[k].chunk)] = static_cast<int32_t>(k);
    }
    std::vector<int32_t> grad_tasks, recent;
    int32_t last = -1;
    auto unit = [&](bool backward, int32_t layers) {
      int32_t gather = -1;
      if (sh.zero3) {
        const size_t ahead = backward && sh.gather_after_backward ? 1 : 2;
        if (recent.size() >= ahead) {
          gather = add(ag, kZeroAg, layers, {recent[recent.size() - ahead]});
        } else {
          gather = add(ag, kZeroAg, layers, {});
        }
      }
      const auto first_deps = [&](int32_t slot) {
        return gather >= 0 ? add(comp, slot, layers, {gather}) : add(comp, slot, layers, {});
      };
      if (sh.detail) {
        first_deps(backward ? kBComp : kFComp);
        last = add(comp, backward ? kBTp : kFTp, layers, {});
      } else {
        last = first_deps(backward ? kB : kF);
      }
      recent.push_back(last);
    };
    for (size_t k = 0; k < order.size(); ++k) {
      const auto [backward, c, i] = order[k];
      chunk = c;
      const int32_t gc = c * p + s;
      const bool first_chunk = gc == 0, last_chunk = gc == p * v - 1;
      const bool has_up = s > 0 || c > 0, has_down = s < p - 1 || c < v - 1;
      const Key up = s > 0 ? Key{backward, s - 1, c, i} : Key{backward, p - 1, c - 1, i};
      const Key down = s < p - 1 ? Key{backward, s + 1, c, i} : Key{backward, 0, c + 1, i};
      const int32_t n_before = static_cast<int32_t>(g.stream.size());
      if (!backward) {
        if (first_chunk) add(comp, kEmbedF, 1, {});
        const int32_t pieces = sh.zero3 ? pieces_of(nl) : 1;
        for (int32_t q = 0; q < pieces; ++q) unit(false, nl / pieces);
        if (last_chunk) last = add(comp, kLogitsF, 1, {});
      } else {
        if (last_chunk) add(comp, kLogitsB, 1, {});
        const bool at_last = static_cast<int32_t>(k) == last_b[static_cast<size_t>(c)];
        // overlapped gradient collectives follow the last backward of each chunk piece by piece;
        // blocking ones (dp_blocking) run after the stage's whole backward, below
        const bool overlap_dp = sh.dp_overlap && at_last && !sh.dp_blocking;
        const int32_t pieces = (sh.zero3 || overlap_dp) ? pieces_of(nl) : 1;
        for (int32_t q = 0; q < pieces; ++q) {
          unit(true, nl / pieces);
          if (sh.zero3) {
            grad_tasks.push_back(add(rs, kZeroRs, nl / pieces, {last}));
          } else if (overlap_dp) {
            grad_tasks.push_back(add(dps, kDpLayer, nl / pieces, {last}));
          }
        }
        if (first_chunk) last = add(comp, kEmbedB, 1, {});
      }
      const bool waits = backward ? has_down : has_up;
      if (waits) {
        int32_t first_task = n_before;
        while (g.stream[static_cast<size_t>(first_task)] != comp) ++first_task;
        pending.emplace_back(first_task, backward ? down : up);
      }
      const bool sends_on = backward ? has_up : has_down;
      if (sends_on) {
        sends[slot_of(Key{backward, s, c, i})] =
            add(sh.p2p_blocking ? comp : send, kSend, 1, {last});
      }
    }
    chunk = -1;
    if (sh.dp_overlap && sh.dp_blocking && !sh.zero3) {
      last = add(comp, kDpLayer, static_cast<double>(nl) * v, {last});
      grad_tasks.push_back(last);
    }
    if (sh.dp_overlap || sh.zero3) {
      const int32_t on = sh.dp_blocking && !sh.zero3 ? comp : dps;
      if (s == 0) grad_tasks.push_back(add(on, kDpEmbed, 1, {last}));
      if (s == p - 1 && !sh.tied) grad_tasks.push_back(add(on, kDpEmbed, 1, {last}));
    }
    if (sh.tied && (s == 0 || s == p - 1)) {
      grad_tasks.push_back(add(sh.dp_blocking ? comp : dps, kTiedEmbed, 1, {last}));
    }
    const double layers_here = static_cast<double>(nl) * v;
    g.stream.push_back(comp);  // the optimizer waits for every gradient collective
    g.slot.push_back(kOptLayer);
    g.mult.push_back(layers_here);
    g.chunk.push_back(-1);
    for (int32_t d : grad_tasks) g.dep_idx.push_back(d);
    g.dep_ptr.push_back(static_cast<int64_t>(g.dep_idx.size()));
    g.wait.push_back(-1);
    int32_t opt = static_cast<int32_t>(g.stream.size()) - 1;
    const int32_t extra = (s == 0 ? 1 : 0) + (s == p - 1 && !sh.tied ? 1 : 0);
    if (extra) opt = add(comp, kOptEmbed, extra, {});
    if (sh.param_gather) {
      const int32_t pg = add(dps, kParamAgLayer, layers_here, {opt});
      if (extra) add(dps, kParamAgEmbed, extra, {pg});
    }
  }
  for (const auto& [task, key] : pending) g.wait[static_cast<size_t>(task)] = sends[slot_of(key)];
  return g;
}

}  // namespace stallscope::predict
