// kineto_scan(buffer) -> columns of a Kineto trace's events (see csrc/kineto/scan.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <utility>
#include <vector>

#include "kineto/scan.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

// A NumPy array owning the vector's storage (no copy).
template <typename T>
py::array_t<T> to_array(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(heap->size()), heap->data(), owner);
}

const char* const kStrNames[] = {"ph",
                                 "cat",
                                 "name",
                                 "a:cuda_sync_kind",
                                 "a:Collective name",
                                 "a:dtype",
                                 "a:Process Group Name",
                                 "a:Process Group Description",
                                 "a:Process Group Ranks"};
const char* const kIntNames[] = {
    "pid",      "tid",     "id",           "a:correlation",   "a:stream",         "a:External id",
    "a:device", "a:bytes", "a:Group size", "a:In msg nelems", "a:Out msg nelems", "ts_ns",
    "dur_ns"};

py::object scan_py(py::buffer data) {
  py::buffer_info info = data.request();
  if (info.itemsize != 1 || info.ndim != 1) throw py::type_error("kineto_scan: expected bytes");
  std::string_view text(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size));
  auto r = std::make_unique<kineto::ScanResult>();
  {
    py::gil_scoped_release nogil;
    kineto::scan(text, *r);
  }
  if (!r->ok) return py::str(r->reason);
  py::dict out;
  out["rows"] = r->rows;
  out["events_span"] = py::make_tuple(r->events_begin, r->events_end);
  for (int i = 0; i < kineto::kNumStr; ++i) {
    py::list strs;
    for (const auto& s : r->str[i].dict.strings()) strs.append(py::str(s.data(), s.size()));
    out[py::str(kStrNames[i])] = py::make_tuple(to_array(std::move(r->str[i].codes)), strs);
  }
  for (int i = 0; i < kineto::kNumInt; ++i) {
    out[py::str(kIntNames[i])] = py::make_tuple(to_array(std::move(r->ints[i].values)),
                                                to_array(std::move(r->ints[i].valid)));
  }
  out["has_ts"] = to_array(std::move(r->has_ts));
  out["has_dur"] = to_array(std::move(r->has_dur));
  out["ts_is_float"] = to_array(std::move(r->ts_is_float));
  out["ts_f64"] = to_array(std::move(r->ts_f64));
  out["dur_f64"] = to_array(std::move(r->dur_f64));
  out["ts_any_float"] = r->ts_any_float;
  out["dur_any_float"] = r->dur_any_float;
  return out;
}

}  // namespace

void bind_kineto(py::module_& m) {
  m.def("kineto_scan", &scan_py, py::arg("data"),
        "Columns of a Kineto trace's traceEvents from its JSON bytes, or a str saying why the "
        "general reader must take it.");
}

}  // namespace stallscope::bindings
