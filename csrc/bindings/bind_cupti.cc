// The CUPTI activity backend's controls (python/stallscope/capture/_cupti.py drives them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "cupti/activity_backend.h"
#include "cupti/cupti_abi.h"
#include "cupti/cupti_loader.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

py::dict stats_dict(const cupti::Stats& s) {
  py::dict d;
  d["buffers_requested"] = s.buffers_requested;
  d["buffers_completed"] = s.buffers_completed;
  d["buffers_declined"] = s.buffers_declined;
  d["pool_bytes"] = s.pool_bytes;
  d["pool_peak_bytes"] = s.pool_peak_bytes;
  d["buffers_outstanding"] = s.buffers_outstanding;
  d["records"] = s.records;
  d["kernels"] = s.kernels;
  d["memcpys"] = s.memcpys;
  d["memsets"] = s.memsets;
  d["syncs"] = s.syncs;
  d["runtime_calls"] = s.runtime_calls;
  d["markers"] = s.markers;
  d["overheads"] = s.overheads;
  d["external_correlations"] = s.external_correlations;
  d["events"] = s.events;
  d["events_not_recorded"] = s.events_not_recorded;
  d["cupti_dropped"] = s.cupti_dropped;
  d["cupti_dropped_before"] = s.cupti_dropped_before;
  d["incomplete"] = s.incomplete;
  d["unknown_kind"] = s.unknown_kind;
  d["unmatched_markers"] = s.unmatched_markers;
  d["distinct_kernel_names"] = s.distinct_kernel_names;
  d["ext_push_errors"] = s.ext_push_errors;
  d["flushes"] = s.flushes;
  return d;
}

}  // namespace

void bind_cupti(py::module_& m) {
  m.def(
      "cupti_load",
      [](const std::vector<std::string>& candidates) {
        cupti::LoadResult r;
        {
          py::gil_scoped_release nogil;
          r = cupti::load(candidates);
        }
        py::dict d;
        d["ok"] = r.ok;
        d["path"] = r.path;
        d["version"] = r.version;
        d["tried"] = r.tried;
        return d;
      },
      py::arg("candidates"),
      "dlopen the first usable libcupti among candidates (kept for the process's life).");
  m.def("cupti_loaded", [] { return cupti::loaded(); });
  m.def("cupti_driver_loadable", [] {
    std::string why;
    const bool ok = cupti::driver_loadable(&why);
    return py::make_tuple(ok, why);
  });
  m.def(
      "cupti_start",
      [](uint64_t buffer_bytes, uint64_t pool_limit_bytes, uint32_t flush_period_ms,
         uint64_t device_buffer_bytes, bool runtime_api, bool markers, bool overhead,
         bool external_correlation) {
        cupti::Options o;
        o.buffer_bytes = buffer_bytes;
        o.pool_limit_bytes = pool_limit_bytes;
        o.flush_period_ms = flush_period_ms;
        o.device_buffer_bytes = device_buffer_bytes;
        o.runtime_api = runtime_api;
        o.markers = markers;
        o.overhead = overhead;
        o.external_correlation = external_correlation;
        cupti::StartResult r;
        {
          py::gil_scoped_release nogil;
          r = cupti::start(o);
        }
        py::dict d;
        d["ok"] = r.ok;
        d["code"] = r.code;
        d["error"] = r.error;
        d["other_subscriber"] = r.other_subscriber;
        d["enabled"] = r.enabled;
        d["failed"] = r.failed;
        return d;
      },
      py::arg("buffer_bytes") = 4ull << 20, py::arg("pool_limit_bytes") = 64ull << 20,
      py::arg("flush_period_ms") = 0, py::arg("device_buffer_bytes") = 0,
      py::arg("runtime_api") = true, py::arg("markers") = true, py::arg("overhead") = true,
      py::arg("external_correlation") = true);
  m.def(
      "cupti_stop",
      [](bool finalize) {
        cupti::Stats s;
        {
          py::gil_scoped_release nogil;
          s = cupti::stop(finalize);
        }
        return stats_dict(s);
      },
      py::arg("finalize") = true);
  m.def("cupti_stats", [] { return stats_dict(cupti::stats()); });
  m.def(
      "cupti_flush",
      [](bool forced) {
        py::gil_scoped_release nogil;
        return cupti::flush(forced);
      },
      py::arg("forced") = false);
  m.def("cupti_probe_subscriber", [] {
    py::gil_scoped_release nogil;
    return cupti::probe_subscriber();
  });
  m.def("cupti_active", [] { return cupti::active(); });
  m.def("cupti_result_name", [](int r) { return std::string(cupti::result_name(r)); });
}

}  // namespace stallscope::bindings
