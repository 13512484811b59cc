// Bindings of the analysis kernels (csrc/analysis/): HTA's rows of an events frame, and the
// rank-local stall table's sweep.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/hta_rows.h"
#include "analysis/stall_sweep.h"
#include "analysis/sync_split.h"
#include "bindings/arrow_column.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

template <typename T>
using In = py::array_t<T, py::array::c_style | py::array::forcecast>;

// rank, base_ns, ts_float, row0_ns (None when the file's first row was not kept)
using Fact = std::tuple<int32_t, int64_t, bool, std::optional<int64_t>>;

// The data of a 1-d column of n rows; a ValueError naming `who` and the column otherwise.
template <typename T>
const T* column_of(const In<T>& a, size_t n, const char* what, const char* who = "stall table") {
  if (a.ndim() != 1 || static_cast<size_t>(a.size()) != n) {
    throw py::value_error(std::string(who) + ": " + what + " has the wrong length");
  }
  return a.data();
}

py::dict hta_rows(const In<uint8_t>& kind, const In<int32_t>& rank, const In<int64_t>& start,
                  const In<int64_t>& end, const In<int32_t>& lane, const In<int64_t>& corr,
                  const In<uint32_t>& name, const In<uint8_t>& hta_kind,
                  const In<uint8_t>& gpu_kind, uint8_t runtime_kind, const In<uint8_t>& name_sync,
                  const In<uint8_t>& name_step, const std::vector<Fact>& facts,
                  bool include_last_step, bool gpu_only) {
  analysis::HtaRowsIn in;
  in.n = static_cast<size_t>(kind.size());
  in.kind = column_of(kind, in.n, "kind", "hta_rows");
  in.rank = column_of(rank, in.n, "rank", "hta_rows");
  in.start = column_of(start, in.n, "start", "hta_rows");
  in.end = column_of(end, in.n, "end", "hta_rows");
  in.lane = column_of(lane, in.n, "lane", "hta_rows");
  in.corr = column_of(corr, in.n, "correlation", "hta_rows");
  in.name = column_of(name, in.n, "name", "hta_rows");
  if (hta_kind.size() != gpu_kind.size() || name_sync.size() != name_step.size()) {
    throw py::value_error("hta_rows: kind or name tables of different sizes");
  }
  in.hta_kind = hta_kind.data();
  in.gpu_kind = gpu_kind.data();
  in.n_kinds = static_cast<size_t>(hta_kind.size());
  in.runtime_kind = runtime_kind;
  in.name_sync = name_sync.data();
  in.name_step = name_step.data();
  in.n_names = static_cast<size_t>(name_sync.size());
  for (const auto& [r, base, ts_float, row0] : facts) {
    in.facts.push_back({r, base, ts_float, row0.has_value(), row0.value_or(0)});
  }
  in.include_last_step = include_last_step;
  in.gpu_only = gpu_only;
  analysis::HtaRowsOut o;
  {
    py::gil_scoped_release nogil;
    o = analysis::hta_rows(in);  // std::invalid_argument reaches Python as ValueError
  }
  py::dict out;
  out["row"] = owned_array(std::move(o.row));
  out["rank"] = owned_array(std::move(o.rank));
  out["kind"] = owned_array(std::move(o.kind));
  out["name"] = owned_array(std::move(o.name));
  out["stream"] = owned_array(std::move(o.stream));
  out["correlation"] = owned_array(std::move(o.corr));
  out["is_gpu"] = owned_array(std::move(o.is_gpu)).attr("view")("bool");
  out["ts"] = owned_array(std::move(o.ts));
  out["end"] = owned_array(std::move(o.end));
  out["runtime"] = owned_array(std::move(o.runtime));
  return out;
}

// rank, t_a, o_a, slope
using ClockFact = std::tuple<int32_t, int64_t, int64_t, double>;

py::dict stall_sweep(const In<uint8_t>& kind, const In<uint8_t>& category, const In<int32_t>& rank,
                     const In<int64_t>& start, const In<int64_t>& end, const In<int32_t>& lane,
                     const In<int64_t>& corr, const std::optional<In<uint8_t>>& corr_null,
                     const In<int8_t>& labels_cpu, const In<int8_t>& labels_gpu,
                     const In<uint8_t>& gpu_kind, size_t n_codes, uint8_t step_kind,
                     uint8_t bucket_kind, const In<int64_t>& comm_row,
                     const In<int32_t>& comm_nnodes, const In<uint8_t>& comm_async,
                     const In<uint8_t>& comm_last, const std::vector<ClockFact>& clocks, bool gpu,
                     const std::vector<int32_t>& multi) {
  analysis::StallSweepIn in;
  in.n = static_cast<size_t>(kind.size());
  in.kind = column_of(kind, in.n, "kind");
  in.category = column_of(category, in.n, "category");
  in.rank = column_of(rank, in.n, "rank");
  in.start = column_of(start, in.n, "start");
  in.end = column_of(end, in.n, "end");
  in.lane = column_of(lane, in.n, "lane");
  in.corr = column_of(corr, in.n, "correlation");
  if (corr_null) in.corr_null = column_of(*corr_null, in.n, "corr_null");
  in.n_kinds = static_cast<size_t>(gpu_kind.size());
  in.n_codes = n_codes;
  const size_t table = in.n_kinds * n_codes;
  in.labels_cpu = column_of(labels_cpu, table, "labels_cpu");
  in.labels_gpu = column_of(labels_gpu, table, "labels_gpu");
  in.gpu_kind = gpu_kind.data();
  in.step_kind = step_kind;
  in.bucket_kind = bucket_kind;
  in.n_comm = static_cast<size_t>(comm_row.size());
  in.comm_row = column_of(comm_row, in.n_comm, "comm_row");
  in.comm_nnodes = column_of(comm_nnodes, in.n_comm, "comm_nnodes");
  in.comm_async = column_of(comm_async, in.n_comm, "comm_async");
  in.comm_last = column_of(comm_last, in.n_comm, "comm_last");
  for (const auto& [r, t_a, o_a, slope] : clocks) in.clocks.push_back({r, t_a, o_a, slope});
  in.gpu = gpu;
  in.multi = multi;
  analysis::StallSweepOut o;
  {
    py::gil_scoped_release nogil;
    o = analysis::stall_sweep(in);  // std::invalid_argument reaches Python as ValueError
  }
  py::dict out;
  out["gpu"] = o.gpu;
  out["multi"] = owned_array(std::move(o.multi));
  out["ranks"] = owned_array(std::move(o.ranks));
  out["windows"] = o.windows;
  out["rank"] = owned_array(std::move(o.rank));
  out["step"] = owned_array(std::move(o.step));
  out["step_null"] = owned_array(std::move(o.step_null)).attr("view")("bool");
  out["start"] = owned_array(std::move(o.start));
  out["end"] = owned_array(std::move(o.end));
  py::list sums;
  for (auto& s : o.sums) sums.append(owned_array(std::move(s)));
  out["sums"] = sums;
  out["x_rank"] = owned_array(std::move(o.x_rank));
  out["x_step_start"] = owned_array(std::move(o.x_step_start));
  out["x_start"] = owned_array(std::move(o.x_start));
  out["x_end"] = owned_array(std::move(o.x_end));
  out["x_network"] = owned_array(std::move(o.x_network)).attr("view")("bool");
  return out;
}

py::tuple sync_split(const In<int32_t>& row_rank, const In<int64_t>& row_start,
                     const In<int64_t>& row_end, const In<int32_t>& x_rank,
                     const In<int64_t>& x_start, const In<int64_t>& x_end,
                     const In<uint8_t>& x_network, const In<int32_t>& w_rank,
                     const In<int64_t>& w_start, const In<int64_t>& w_end) {
  analysis::SyncSplitIn in;
  in.n_rows = static_cast<size_t>(row_rank.size());
  in.row_rank = column_of(row_rank, in.n_rows, "row_rank");
  in.row_start = column_of(row_start, in.n_rows, "row_start");
  in.row_end = column_of(row_end, in.n_rows, "row_end");
  in.n_exposed = static_cast<size_t>(x_rank.size());
  in.x_rank = column_of(x_rank, in.n_exposed, "x_rank");
  in.x_start = column_of(x_start, in.n_exposed, "x_start");
  in.x_end = column_of(x_end, in.n_exposed, "x_end");
  in.x_network = column_of(x_network, in.n_exposed, "x_network");
  in.n_waits = static_cast<size_t>(w_rank.size());
  in.w_rank = column_of(w_rank, in.n_waits, "w_rank");
  in.w_start = column_of(w_start, in.n_waits, "w_start");
  in.w_end = column_of(w_end, in.n_waits, "w_end");
  analysis::SyncSplitOut o;
  {
    py::gil_scoped_release nogil;
    o = analysis::sync_split(in);
  }
  return py::make_tuple(owned_array(std::move(o.network)), owned_array(std::move(o.interconnect)));
}

}  // namespace

void bind_analysis(py::module_& m) {
  m.def("hta_rows", &hta_rows, py::arg("kind"), py::arg("rank"), py::arg("start"), py::arg("end"),
        py::arg("lane"), py::arg("correlation"), py::arg("name"), py::arg("hta_kind"),
        py::arg("gpu_kind"), py::arg("runtime_kind"), py::arg("name_sync"), py::arg("name_step"),
        py::arg("facts"), py::arg("include_last_step"), py::arg("gpu_only") = false,
        "HTA's rows of an events frame's columns (csrc/analysis/hta_rows.h): a dict of NumPy "
        "arrays row, rank, kind, name, stream, correlation, is_gpu, ts, end, runtime; gpu_only: "
        "only the rows with a stream.");
  m.def("stall_sweep", &stall_sweep, py::arg("kind"), py::arg("category"), py::arg("rank"),
        py::arg("start"), py::arg("end"), py::arg("lane"), py::arg("correlation"),
        py::arg("corr_null"), py::arg("labels_cpu"), py::arg("labels_gpu"), py::arg("gpu_kind"),
        py::arg("n_codes"), py::arg("step_kind"), py::arg("bucket_kind"), py::arg("comm_row"),
        py::arg("comm_nnodes"), py::arg("comm_async"), py::arg("comm_last"), py::arg("clocks"),
        py::arg("gpu"), py::arg("multi"),
        "The rank-local stall table of an events frame's columns (csrc/analysis/stall_sweep.h): "
        "a dict with gpu, multi, ranks, windows, the table's rank, step, step_null, start, end "
        "and sums (8 arrays, ns per category), and the exposed communication x_rank, "
        "x_step_start, x_start, x_end, x_network.");
  m.def("sync_split", &sync_split, py::arg("row_rank"), py::arg("row_start"), py::arg("row_end"),
        py::arg("x_rank"), py::arg("x_start"), py::arg("x_end"), py::arg("x_network"),
        py::arg("w_rank"), py::arg("w_start"), py::arg("w_end"),
        "(network, interconnect): per table row, the ns of its exposed communication inside "
        "the rank's waits (csrc/analysis/sync_split.h).");
}

}  // namespace stallscope::bindings
