// KinetoScanner: the streaming Kineto JSON reader (csrc/kineto/stream_scanner.h) for Python.
// feed() releases the GIL, so decompression in another thread overlaps the scan.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string_view>
#include <utility>
#include <vector>

#include "kineto/stream_scanner.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

using kineto::FileResult;
using kineto::StreamScanner;

// A NumPy array owning the vector's storage (no copy).
template <typename T>
py::array_t<T> to_array(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(heap->size()), heap->data(), owner);
}

const char* const kRowIntNames[] = {"index",       "ts_ns",  "dur_ns", "pid",    "tid",
                                    "correlation", "stream", "ext",    "device", "bytes"};
const char* const kRowStrNames[] = {"cat", "name", "sync_kind"};
const char* const kNcclIntNames[] = {"index", "group_size", "in_nelems"};
const char* const kNcclStrNames[] = {"coll", "dtype", "pg", "pg_desc", "pg_ranks"};
const char* const kFlowNames[] = {"pid", "tid", "ts_ns", "id"};
const char* const kProblemNames[] = {"no_dur", "no_cat", "bad_time", "negative_dur"};

bool feed(StreamScanner& s, const py::buffer& data) {
  py::buffer_info info = data.request();
  if (info.itemsize != 1 || info.ndim != 1) throw py::type_error("feed: expected bytes");
  std::string_view text(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size));
  py::gil_scoped_release nogil;
  return s.feed(text);
}

py::object end_file(StreamScanner& s) {
  FileResult r;
  bool ok;
  {
    py::gil_scoped_release nogil;
    ok = s.end_file(&r);
  }
  if (!ok) return py::str(s.reason());
  py::dict out, rows, nccl, flows, problems;
  for (int i = 0; i < kineto::kNumRowInt; ++i)
    rows[kRowIntNames[i]] = to_array(std::move(r.rows[i]));
  for (int i = 0; i < kineto::kNumRowStr; ++i)
    rows[kRowStrNames[i]] = to_array(std::move(r.strs[i]));
  for (int i = 0; i < kineto::kNumNcclInt; ++i)
    nccl[kNcclIntNames[i]] = to_array(std::move(r.nccl[i]));
  for (int i = 0; i < kineto::kNumNcclStr; ++i) {
    nccl[kNcclStrNames[i]] = to_array(std::move(r.nccl_strs[i]));
  }
  for (int i = 0; i < kineto::kNumFlowInt; ++i)
    flows[kFlowNames[i]] = to_array(std::move(r.flows[i]));
  flows["cat"] = to_array(std::move(r.flow_cat));
  for (int i = 0; i < kineto::kNumProblems; ++i) problems[kProblemNames[i]] = r.problems[i];
  out["rows"] = rows;
  out["nccl"] = nccl;
  out["flows"] = flows;
  out["problems"] = problems;
  out["events"] = r.events;
  out["ts_float"] = r.ts_float;
  out["meta_json"] = py::bytes(r.meta_json);
  out["rank"] = r.rank_found ? py::object(py::int_(r.rank)) : py::object(py::none());
  return out;
}

py::list strings(const kineto::Dict& d, size_t from) {
  py::list out;
  const auto& strs = d.strings();
  for (size_t i = from; i < strs.size(); ++i) out.append(py::str(strs[i].data(), strs[i].size()));
  return out;
}

}  // namespace

void bind_kineto(py::module_& m) {
  py::class_<StreamScanner>(m, "KinetoScanner",
                            "Streaming reader of Kineto JSON: begin_file(), feed(chunk)..., "
                            "end_file(); string dictionaries shared by the files read.")
      .def(py::init<>())
      .def("begin_file", &StreamScanner::begin_file, py::arg("text_bytes") = 0,
           "Start a new file (dictionaries kept); text_bytes: its expected text size, if known.")
      .def("feed", &feed, py::arg("chunk"),
           "Read the next chunk of the file's text; False once the file is unsupported.")
      .def("end_file", &end_file,
           "End of the file: its columns (dict), or a str saying why the general reader must "
           "take it.")
      .def(
          "strings",
          [](const StreamScanner& s, const std::string& which, size_t start) {
            const kineto::Dict& d = which == "cat"    ? s.cats()
                                    : which == "name" ? s.names()
                                                      : s.args();
            return strings(d, start);
          },
          py::arg("which"), py::arg("start") = 0,
          "Dictionary 'cat', 'name' or 'args' from code `start` on.");
}

}  // namespace stallscope::bindings
