// Bindings of the predictor's native engine run (csrc/predict/): one graph, many duration sets.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "predict/engine_run.h"
#include "predict/pipeline_graph.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

template <typename T>
using In = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
const T* checked(const In<T>& a, int64_t n, const char* what) {
  if (a.ndim() != 1 || a.size() != n) {
    throw py::value_error(std::string("engine_run: ") + what + " has the wrong length");
  }
  return a.data();
}

predict::EngineGraph graph_of(const In<int32_t>& order, const In<int32_t>& stream,
                              int64_t n_streams, const In<int64_t>& dep_ptr,
                              const In<int32_t>& dep_idx, const In<int64_t>& wait_ptr,
                              const In<int32_t>& wait_idx) {
  predict::EngineGraph g;
  g.n = order.size();
  g.order = checked(order, g.n, "order");
  g.stream = checked(stream, g.n, "stream");
  g.n_streams = n_streams;
  g.dep_ptr = checked(dep_ptr, g.n + 1, "dep_ptr");
  g.wait_ptr = checked(wait_ptr, g.n + 1, "wait_ptr");
  g.dep_idx = dep_idx.data();
  g.wait_idx = wait_idx.data();
  for (int64_t i = 0; i < g.n; ++i) {
    if (g.order[i] < 0 || g.order[i] >= g.n || g.stream[i] < 0 || g.stream[i] >= n_streams) {
      throw py::value_error("engine_run: a task or stream index is out of range");
    }
  }
  auto check_csr = [&](const int64_t* ptr, const int32_t* idx, int64_t size, const char* what) {
    if (ptr[0] != 0 || ptr[g.n] != size) {
      throw py::value_error(std::string("engine_run: ") + what + " offsets do not match");
    }
    for (int64_t k = 0; k < size; ++k) {
      if (idx[k] < 0 || idx[k] >= g.n) {
        throw py::value_error(std::string("engine_run: ") + what + " names an unknown task");
      }
    }
  };
  check_csr(g.dep_ptr, g.dep_idx, dep_idx.size(), "deps");
  check_csr(g.wait_ptr, g.wait_idx, wait_idx.size(), "wait_on");
  return g;
}

py::tuple engine_run(const In<int32_t>& order, const In<int32_t>& stream, int64_t n_streams,
                     const In<int64_t>& dep_ptr, const In<int32_t>& dep_idx,
                     const In<int64_t>& wait_ptr, const In<int32_t>& wait_idx,
                     const In<int64_t>& duration) {
  const predict::EngineGraph g =
      graph_of(order, stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx);
  const int64_t* dur = checked(duration, g.n, "duration");
  py::array_t<int64_t> start(g.n), end(g.n), ready(g.n);
  std::vector<int64_t> free_at(static_cast<size_t>(n_streams));
  {
    py::gil_scoped_release nogil;
    predict::engine_run(g, dur, start.mutable_data(), end.mutable_data(), ready.mutable_data(),
                        free_at.data());
  }
  return py::make_tuple(start, end, ready);
}

// The makespan of `g` for each of `rows` duration sets; `durations(r, buffer)` gives row r's
// durations (a pointer into the caller's data, or `buffer` filled), called without the GIL.
template <typename Durations>
py::array_t<int64_t> makespans_of(const predict::EngineGraph& g, int64_t rows,
                                  Durations durations) {
  py::array_t<int64_t> out(rows);
  int64_t* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    std::vector<int64_t> buffer(g.n), start(g.n), end(g.n), ready(g.n), free_at(g.n_streams);
    for (int64_t r = 0; r < rows; ++r) {
      predict::engine_run(g, durations(r, buffer), start.data(), end.data(), ready.data(),
                          free_at.data());
      o[r] = g.n ? *std::max_element(end.begin(), end.end()) : 0;
    }
  }
  return out;
}

// The makespan of each row of `durations` (k x n): one graph re-timed k times.
py::array_t<int64_t> engine_makespans(const In<int32_t>& order, const In<int32_t>& stream,
                                      int64_t n_streams, const In<int64_t>& dep_ptr,
                                      const In<int32_t>& dep_idx, const In<int64_t>& wait_ptr,
                                      const In<int32_t>& wait_idx, const In<int64_t>& durations) {
  const predict::EngineGraph g =
      graph_of(order, stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx);
  if (durations.ndim() != 2 || durations.shape(1) != g.n) {
    throw py::value_error("engine_makespans: durations must be (rows, tasks)");
  }
  const int64_t* d = durations.data();
  return makespans_of(g, durations.shape(0), [&](int64_t r, std::vector<int64_t>&) {
    return d + r * g.n;  // the row itself: nothing to fill
  });
}

// The makespan of one graph for each row of per-slot costs (k x slots, ns): task t takes
// round(costs[r][slot[t]] * mult[t]) ns, rounded half to even as numpy.rint does, so that the
// makespans equal engine_makespans' on the matrix numpy would build (k x n) without building it.
py::array_t<int64_t> engine_makespans_by_slot(const In<int32_t>& order, const In<int32_t>& stream,
                                              int64_t n_streams, const In<int64_t>& dep_ptr,
                                              const In<int32_t>& dep_idx,
                                              const In<int64_t>& wait_ptr,
                                              const In<int32_t>& wait_idx, const In<int32_t>& slot,
                                              const In<double>& mult, const In<double>& costs) {
  const predict::EngineGraph g =
      graph_of(order, stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx);
  const int32_t* sl = checked(slot, g.n, "slot");
  const double* mu = checked(mult, g.n, "mult");
  if (costs.ndim() != 2) throw py::value_error("engine_makespans_by_slot: costs must be 2-D");
  const int64_t rows = costs.shape(0);
  const int64_t slots = costs.shape(1);
  for (int64_t t = 0; t < g.n; ++t) {
    if (sl[t] < 0 || sl[t] >= slots) {
      throw py::value_error("engine_makespans_by_slot: a slot index is out of range");
    }
  }
  const double* c = costs.data();
  return makespans_of(g, rows, [&](int64_t r, std::vector<int64_t>& dur) {
    const double* row = c + r * slots;
    for (int64_t t = 0; t < g.n; ++t) {
      dur[t] = static_cast<int64_t>(std::nearbyint(row[sl[t]] * mu[t]));  // half to even
    }
    return static_cast<const int64_t*>(dur.data());
  });
}

// A topological order of a graph's tasks (Kahn), or None when it has a dependency loop.
py::object engine_order(const In<int32_t>& stream, int64_t n_streams, const In<int64_t>& dep_ptr,
                        const In<int32_t>& dep_idx, const In<int64_t>& wait_ptr,
                        const In<int32_t>& wait_idx) {
  In<int32_t> identity(stream.size());
  for (int64_t i = 0; i < stream.size(); ++i) identity.mutable_data()[i] = static_cast<int32_t>(i);
  const predict::EngineGraph g =
      graph_of(identity, stream, n_streams, dep_ptr, dep_idx, wait_ptr, wait_idx);
  py::array_t<int32_t> out(g.n);
  int64_t placed = 0;
  {
    py::gil_scoped_release nogil;
    placed = predict::engine_order(g, out.mutable_data());
  }
  if (placed < g.n) return py::none();
  return std::move(out);
}

template <typename T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

py::dict pipeline_graph(int32_t pp, int32_t micro_batches, int32_t interleave,
                        int32_t layers_per_chunk, bool zero3, bool dp_overlap, bool tied,
                        bool param_gather, bool detail, bool p2p_blocking, bool dp_blocking,
                        bool gather_after_backward) {
  if (pp < 1 || micro_batches < 1 || interleave < 1 || layers_per_chunk < 1) {
    throw py::value_error("pipeline_graph: pp, micro_batches, interleave, layers must be >= 1");
  }
  predict::PipelineShape sh;
  sh.pp = pp;
  sh.micro_batches = micro_batches;
  sh.interleave = interleave;
  sh.layers_per_chunk = layers_per_chunk;
  sh.zero3 = zero3;
  sh.dp_overlap = dp_overlap;
  sh.tied = tied;
  sh.param_gather = param_gather;
  sh.detail = detail;
  sh.p2p_blocking = p2p_blocking;
  sh.dp_blocking = dp_blocking;
  sh.gather_after_backward = gather_after_backward;
  predict::PipelineGraph g;
  {
    py::gil_scoped_release nogil;
    g = predict::pipeline_graph(sh);
  }
  std::vector<int64_t> wait_ptr(g.wait.size() + 1, 0);
  std::vector<int32_t> wait_idx;
  for (size_t i = 0; i < g.wait.size(); ++i) {
    if (g.wait[i] >= 0) wait_idx.push_back(g.wait[i]);
    wait_ptr[i + 1] = static_cast<int64_t>(wait_idx.size());
  }
  py::dict out;
  out["stream"] = to_array(g.stream);
  out["stream_class"] = to_array(g.stream_class);
  out["slot"] = to_array(g.slot);
  out["mult"] = to_array(g.mult);
  out["chunk"] = to_array(g.chunk);
  out["dep_ptr"] = to_array(g.dep_ptr);
  out["dep_idx"] = to_array(g.dep_idx);
  out["wait_ptr"] = to_array(wait_ptr);
  out["wait_idx"] = to_array(wait_idx);
  return out;
}

}  // namespace

void bind_predict(py::module_& m) {
  m.def("engine_run", &engine_run, py::arg("order"), py::arg("stream"), py::arg("n_streams"),
        py::arg("dep_ptr"), py::arg("dep_idx"), py::arg("wait_ptr"), py::arg("wait_idx"),
        py::arg("duration"),
        "Start, end and ready ns of every task of a graph visited in `order` (the Python "
        "engine's run, natively).");
  m.def("engine_makespans", &engine_makespans, py::arg("order"), py::arg("stream"),
        py::arg("n_streams"), py::arg("dep_ptr"), py::arg("dep_idx"), py::arg("wait_ptr"),
        py::arg("wait_idx"), py::arg("durations"),
        "The makespan of one graph for each row of durations (rows x tasks, ns).");
  m.def("engine_makespans_by_slot", &engine_makespans_by_slot, py::arg("order"), py::arg("stream"),
        py::arg("n_streams"), py::arg("dep_ptr"), py::arg("dep_idx"), py::arg("wait_ptr"),
        py::arg("wait_idx"), py::arg("slot"), py::arg("mult"), py::arg("costs"),
        "The makespan of one graph for each row of per-slot costs (rows x slots, ns): task t "
        "takes rint(costs[row, slot[t]] * mult[t]).");
  m.def("engine_order", &engine_order, py::arg("stream"), py::arg("n_streams"), py::arg("dep_ptr"),
        py::arg("dep_idx"), py::arg("wait_ptr"), py::arg("wait_idx"),
        "A topological order of the tasks (stream order, deps, wait_on), or None on a loop.");
  m.def("pipeline_graph", &pipeline_graph, py::arg("pp"), py::arg("micro_batches"),
        py::arg("interleave"), py::arg("layers_per_chunk"), py::arg("zero3"), py::arg("dp_overlap"),
        py::arg("tied"), py::arg("param_gather"), py::arg("detail"),
        py::arg("p2p_blocking") = false, py::arg("dp_blocking") = false,
        py::arg("gather_after_backward") = false,
        "The planner's pipeline schedule graph as arrays (stallscope/plan/_schedule.py).");
}

}  // namespace stallscope::bindings
