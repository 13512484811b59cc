// Generic recording entry points: one event, a batch from NumPy columns (tests, importers of
// native data), and the multi-threaded C++ recorder of the stress tests and benchmarks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>

#include "core/recorder.h"
#include "core/stress_record.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

template <class T>
using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;

// Records the rows of the given columns from the calling thread; returns how many were accepted.
uint64_t record_columns(const arr<int64_t>& start_ns, const arr<int64_t>& end_ns,
                        const arr<int64_t>& correlation, const arr<int64_t>& bytes,
                        const arr<uint32_t>& name_id, const arr<uint32_t>& detail_id,
                        const arr<int32_t>& lane, const arr<int16_t>& device,
                        const arr<uint8_t>& kind, const arr<uint8_t>& category) {
  const py::ssize_t n = start_ns.size();
  for (const py::ssize_t m :
       {end_ns.size(), correlation.size(), bytes.size(), name_id.size(), detail_id.size(),
        lane.size(), device.size(), kind.size(), category.size()}) {
    if (m != n)
      throw std::invalid_argument("record_columns: every column must have the same length");
  }
  const int64_t* s = start_ns.data();
  const int64_t* e = end_ns.data();
  const int64_t* c = correlation.data();
  const int64_t* b = bytes.data();
  const uint32_t* nm = name_id.data();
  const uint32_t* dt = detail_id.data();
  const int32_t* ln = lane.data();
  const int16_t* dv = device.data();
  const uint8_t* k = kind.data();
  const uint8_t* ct = category.data();
  uint64_t accepted = 0;
  py::gil_scoped_release release;
  for (py::ssize_t i = 0; i < n; ++i) {
    EventRecord r{s[i], e[i], c[i], b[i], nm[i], dt[i], ln[i], dv[i], k[i], ct[i]};
    accepted += record(r) ? 1 : 0;
  }
  return accepted;
}

// stress_record (core/stress_record.h) with the GIL released: (per-thread elapsed ns, per-thread
// accepted counts).
py::tuple stress(int threads, uint64_t n, uint32_t name_id, bool read_clock) {
  StressResult r;
  {
    py::gil_scoped_release release;
    r = stress_record(threads, n, name_id, read_clock);
  }
  py::list el, ac;
  for (size_t t = 0; t < r.elapsed_ns.size(); ++t) {
    el.append(r.elapsed_ns[t]);
    ac.append(r.accepted[t]);
  }
  return py::make_tuple(el, ac);
}

}  // namespace

void bind_recording(py::module_& m) {
  m.def(
      "record",
      [](uint8_t kind, uint8_t category, uint32_t name_id, int64_t start_ns, int64_t end_ns,
         int64_t correlation, int64_t bytes, int32_t lane, int16_t device, uint32_t detail_id) {
        EventRecord r{start_ns,  end_ns, correlation, bytes, name_id,
                      detail_id, lane,   device,      kind,  category};
        return record(r);
      },
      py::arg("kind"), py::arg("category"), py::arg("name_id"), py::arg("start_ns"),
      py::arg("end_ns"), py::arg("correlation") = 0, py::arg("bytes") = 0, py::arg("lane") = 0,
      py::arg("device") = -1, py::arg("detail_id") = 0,
      "Record one event from the calling thread. False when off or dropped.");
  m.def("record_columns", &record_columns, py::arg("start_ns"), py::arg("end_ns"),
        py::arg("correlation"), py::arg("bytes"), py::arg("name_id"), py::arg("detail_id"),
        py::arg("lane"), py::arg("device"), py::arg("kind"), py::arg("category"));
  m.def("stress_record", &stress, py::arg("threads"), py::arg("n"), py::arg("name_id") = 0,
        py::arg("read_clock") = false);
  m.def("current_lane", &current_lane);
}

}  // namespace stallscope::bindings
