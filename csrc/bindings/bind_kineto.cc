// The Kineto importer's native parts for Python: KinetoScanner, the streaming JSON reader
// (csrc/kineto/stream_scanner.h; feed() releases the GIL, so decompression in another thread
// overlaps the scan), the row conversion (row_convert.h) and the detail column's job
// (detail_job.h). Only the wrapping is here: arrays in and out, the GIL, Python's errors.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arrow/column_export.h"
#include "bindings/arrow_column.h"
#include "core/event_record.h"
#include "kineto/detail_job.h"
#include "kineto/row_convert.h"
#include "kineto/stream_scanner.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

using kineto::FileResult;
using kineto::StreamScanner;

// A NumPy array owning the vector's storage (no copy; shareable with Polars, arrow_column.h).
template <typename T>
py::array_t<T> to_array(std::vector<T>&& v) {
  return owned_array(std::move(v));
}

// The same, read-only: kineto_convert's columns go into the events frame without a copy.
template <typename T>
py::array_t<T> to_frozen(std::vector<T>&& v) {
  return owned_array(std::move(v), false);
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

// Reads the rest of the file's text with `readinto` (a binary reader's: a gzip reader or the
// file) straight into the scanner's fill buffer: no bytes object per chunk and no copy. False
// once the file is unsupported (the rest is not read).
bool feed_from(StreamScanner& s, const py::object& readinto) {
  for (;;) {
    StreamScanner::Span space = s.input_space();
    py::memoryview view = py::memoryview::from_memory(space.data, static_cast<ssize_t>(space.size));
    py::object got = readinto(view);
    view.attr("release")();  // a reader that kept the view cannot write through it later
    if (got.is_none()) throw py::value_error("feed_from: readinto returned None (non-blocking)");
    auto n = got.cast<size_t>();
    if (n == 0) return true;  // end of the text
    if (n > space.size) throw py::value_error("feed_from: readinto wrote past the buffer");
    py::gil_scoped_release nogil;
    if (!s.input_done(n)) return false;
  }
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

template <typename T>
using In = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
const T* column(const py::dict& cols, const char* key, size_t n, size_t offset,
                std::vector<In<T>>* keep) {
  keep->push_back(cols[key].cast<In<T>>());
  const In<T>& a = keep->back();
  if (a.ndim() != 1 || static_cast<size_t>(a.size()) != n) {
    throw py::value_error(std::string("kineto_convert: column ") + key + " has the wrong length");
  }
  return a.data() + offset;
}

// `cols`: one dict of scanner columns per file, or one dict of every file's (file order),
// split by `sizes`.
py::dict convert(const py::object& cols, const In<uint8_t>& cat_kind, const In<uint8_t>& cat_drop,
                 const In<int64_t>& name_step, const In<uint8_t>& name_gpu_cat,
                 const In<uint8_t>& kind_gpu, const In<uint8_t>& kind_order,
                 const std::vector<int32_t>& ranks, const std::vector<int64_t>& bases,
                 const std::vector<size_t>& sizes, int32_t mark_cat0, int32_t mark_name,
                 int threads, bool links, int32_t null_name) {
  if (ranks.size() != bases.size() || ranks.size() != sizes.size()) {
    throw py::value_error("kineto_convert: ranks, bases and sizes differ in length");
  }
  if (kind_gpu.size() < kNumKinds || kind_order.size() < kNumKinds ||
      name_step.size() != name_gpu_cat.size() || cat_drop.size() != cat_kind.size()) {
    throw py::value_error("kineto_convert: tables of the wrong size");
  }
  const size_t nf = ranks.size();
  const bool split = py::isinstance<py::dict>(cols);
  std::vector<py::dict> per_file;
  if (split) {
    per_file.assign(nf, cols.cast<py::dict>());
  } else {
    for (const py::handle h : cols) per_file.push_back(h.cast<py::dict>());
    if (per_file.size() != nf) {
      throw py::value_error("kineto_convert: cols has a dict per file: as many as sizes");
    }
  }
  size_t whole = 0;  // rows of the one dict that every file's columns are part of
  for (size_t s : sizes) whole += s;
  std::vector<kineto::FileIn> files;
  std::vector<In<int32_t>> keep32;  // the arrays whose data `files` points into
  std::vector<In<int64_t>> keep64;
  size_t offset = 0;
  for (size_t f = 0; f < nf; ++f) {
    kineto::FileIn file{ranks[f], bases[f], {}};
    kineto::RowsIn& in = file.rows;
    in.n = sizes[f];
    const size_t len = split ? whole : sizes[f], at = split ? offset : 0;
    const std::pair<const char*, const int32_t**> cols32[] = {
        {"cat", &in.cat}, {"name", &in.name}, {"sync_kind", &in.sync}};
    const std::pair<const char*, const int64_t**> cols64[] = {
        {"index", &in.index},   {"ts_ns", &in.ts},
        {"dur_ns", &in.dur},    {"pid", &in.pid},
        {"tid", &in.tid},       {"stream", &in.stream},
        {"device", &in.device}, {"correlation", &in.correlation},
        {"bytes", &in.bytes},   {"ext", &in.ext}};
    for (const auto& [key, dst] : cols32)
      *dst = column<int32_t>(per_file[f], key, len, at, &keep32);
    for (const auto& [key, dst] : cols64)
      *dst = column<int64_t>(per_file[f], key, len, at, &keep64);
    files.push_back(file);
    offset += sizes[f];
  }
  kineto::Tables t{.cat_kind = cat_kind.data(),
                   .cat_drop = cat_drop.data(),
                   .n_cat = static_cast<size_t>(cat_kind.size()),
                   .name_step = name_step.data(),
                   .name_gpu_cat = name_gpu_cat.data(),
                   .n_name = static_cast<size_t>(name_step.size()),
                   .null_name = null_name,
                   .kind_gpu = kind_gpu.data()};
  kineto::RowsOut r;
  {
    py::gil_scoped_release nogil;
    r = kineto::convert_rows(t, files, kind_order.data(), mark_cat0, mark_name, threads, links);
  }
  const size_t rows = r.rows;
  auto frame = [&r, rows](const auto* data) {
    return shared_array(r.frame, data, rows, false);  // read-only: shared with Polars
  };
  auto work = [&r](const auto* data, size_t len) { return shared_array(r.work, data, len, false); };
  py::dict out;
  out["rank"] = frame(r.rank);
  out["pid"] = frame(r.pid);
  out["kind"] = frame(r.kind);
  out["category"] = frame(r.category);
  out["name"] = frame(r.name);
  out["start_ns"] = frame(r.start);
  out["end_ns"] = frame(r.end);
  out["lane"] = frame(r.lane);
  out["device"] = frame(r.device);
  out["correlation"] = frame(r.correlation);
  out["bytes"] = frame(r.bytes);
  out["cat"] = work(r.cat, rows);
  out["ext"] = work(r.ext, rows);
  out["sync_kind"] = work(r.sync, rows);
  if (links) {
    out["index"] = work(r.index, rows);
    out["kind_order"] = work(r.kind_order, rows);
    out["out_row"] = work(r.out_row, r.inputs);
  }
  out["file_row0"] = to_frozen(std::move(r.file_row0));
  out["file_kept"] = to_frozen(std::move(r.file_kept));
  return out;
}

// The detail column's job (csrc/kineto/detail_job.h), with the arrays it reads: they live as
// long as the job (declared first, destroyed after it, whose threads read them).
class DetailJobHandle {
 public:
  DetailJobHandle(In<int32_t> cat, std::vector<std::string> cat_table, In<int64_t> ext,
                  In<int32_t> sync, std::vector<std::string> sync_table)
      : cat_(std::move(cat)), ext_(std::move(ext)), sync_(std::move(sync)) {
    const auto n = static_cast<size_t>(cat_.size());
    if (static_cast<size_t>(ext_.size()) != n || static_cast<size_t>(sync_.size()) != n) {
      throw py::value_error("kineto_detail: cat, ext and sync differ in length");
    }
    py::gil_scoped_release nogil;
    job_ = std::make_unique<kineto::DetailJob>(cat_.data(), ext_.data(), sync_.data(), n,
                                               std::move(cat_table), std::move(sync_table));
  }
  void start(size_t threads) { job_->start(threads); }
  ArrowColumn result() {
    std::shared_ptr<const arrow::Column> col;
    {
      py::gil_scoped_release nogil;
      col = job_->result();
    }
    return ArrowColumn{std::move(col)};
  }

 private:
  In<int32_t> cat_;
  In<int64_t> ext_;
  In<int32_t> sync_;
  std::unique_ptr<kineto::DetailJob> job_;
};

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
      .def(py::init<size_t, size_t>(), py::arg("split_min") = StreamScanner::kSplitMin,
           py::arg("fill_bytes") = StreamScanner::kFillBytes,
           "split_min: chunks of at least this many bytes are read by two threads (0: one); "
           "fill_bytes: text gathered before it is read (with two threads).")
      .def("begin_file", &StreamScanner::begin_file, py::arg("text_bytes") = 0,
           "Start a new file (dictionaries kept); text_bytes: its expected text size, if known.")
      .def("feed", &feed, py::arg("chunk"),
           "Read the next chunk of the file's text; False once the file is unsupported.")
      .def("feed_from", &feed_from, py::arg("readinto"),
           "Read the rest of the file's text through readinto(buffer) -> bytes written (0 at "
           "the end), straight into the scanner's buffer; False once the file is unsupported.")
      .def("end_file", &end_file,
           "End of the file: its columns (dict), or a str saying why the general reader must "
           "take it.")
      .def(
          "release_buffers",
          [](StreamScanner& s) {
            py::gil_scoped_release nogil;  // joins the second thread
            s.release_buffers();
          },
          "Free the text buffers and the second thread once the last file is read (the "
          "dictionaries stay; reading again makes them anew).")
      .def(
          "adopt",
          [](StreamScanner& s, const StreamScanner& other) {
            StreamScanner::CodeMaps m = s.adopt(other);
            return py::make_tuple(to_array(std::move(m.cat)), to_array(std::move(m.name)),
                                  to_array(std::move(m.args)));
          },
          py::arg("other"),
          "Intern another scanner's strings (files it read, merged into this import): per "
          "dictionary (cat, name, args) an int32 array, its code -> this scanner's code.")
      .def(
          "strings",
          [](const StreamScanner& s, const std::string& which, size_t start) {
            const kineto::Dict& d = which == "cat"    ? s.cats()
                                    : which == "name" ? s.names()
                                                      : s.args();
            return strings(d, start);
          },
          py::arg("which"), py::arg("start") = 0,
          "Dictionary 'cat', 'name' or 'args' from code `start` on.")
      .def_property_readonly("splits_taken", &StreamScanner::splits_taken,
                             "Chunks whose second half a second thread read.")
      .def_property_readonly("splits_missed", &StreamScanner::splits_missed,
                             "Chunks split at a guess that was not an event's start (read by "
                             "one thread).");
  m.def(
      "trim_heap",
      []() {
#if defined(__GLIBC__)
        py::gil_scoped_release nogil;
        return malloc_trim(0) != 0;
#else
        return false;
#endif
      },
      "Give the C heap's free pages back to the OS (glibc's malloc_trim; False elsewhere or "
      "when nothing was released). The importer frees its scan columns (tens of MiB on large "
      "traces) into a heap that glibc would otherwise keep.");
  py::class_<DetailJobHandle>(
      m, "DetailJob",
      "The detail column of kineto_convert's rows (see io/kineto/_native.py), "
      "its buffers sized on the thread that made the job.")
      .def("start", &DetailJobHandle::start, py::arg("threads") = 1,
           "Write the rows on `threads` threads of their own, the parts not taken by them on "
           "the caller's in result() (which waits for them).")
      .def("result", &DetailJobHandle::result,
           "The column as an ArrowColumn (written here unless start() was called).");
  m.def(
      "kineto_detail",
      [](In<int32_t> cat, std::vector<std::string> cat_table, In<int64_t> ext, In<int32_t> sync,
         std::vector<std::string> sync_table) {
        return std::make_unique<DetailJobHandle>(std::move(cat), std::move(cat_table),
                                                 std::move(ext), std::move(sync),
                                                 std::move(sync_table));
      },
      py::arg("cat"), py::arg("cat_table"), py::arg("ext"), py::arg("sync"), py::arg("sync_table"),
      "A DetailJob for the detail column of kineto_convert's rows: the codes checked and the "
      "buffers sized here (out_of_range for a code past its table).");
  m.def("kineto_convert", &convert, py::arg("cols"), py::arg("cat_kind"), py::arg("cat_drop"),
        py::arg("name_step"), py::arg("name_gpu_cat"), py::arg("kind_gpu"), py::arg("kind_order"),
        py::arg("ranks"), py::arg("bases"), py::arg("sizes"), py::arg("mark_cat0"),
        py::arg("mark_name"), py::arg("threads") = 2, py::arg("links") = true,
        py::arg("null_name") = -1,
        "Scanner columns of each file (a dict per file, or one dict of every file's in file "
        "order, split by sizes) -> event-schema columns sorted by rank, start, event index, "
        "file, with one trace mark per file; rows of the categories cat_drop marks are left out "
        "(csrc/kineto/row_convert.h). threads: the most threads to use, this one included "
        "(more than one from kineto_convert_threads_min rows on; more than two for several "
        "files of one rank each, a thread converting whole files). links: also index, "
        "kind_order and out_row (input row -> output row, -1 dropped), which placing NCCL "
        "collectives needs. null_name: the name code of rows whose name is -1 (none; -1: such "
        "rows are refused).");
  m.def(
      "kineto_cat_counts",
      [](const In<int32_t>& cat, const In<int64_t>& correlation, size_t n_cat) {
        if (cat.ndim() != 1 || correlation.ndim() != 1 || cat.size() != correlation.size()) {
          throw py::value_error("kineto_cat_counts: cat and correlation differ in length");
        }
        py::array_t<int64_t> rows(static_cast<py::ssize_t>(n_cat));
        py::array_t<int64_t> no_corr(static_cast<py::ssize_t>(n_cat));
        kineto::count_by_cat(cat.data(), correlation.data(), static_cast<size_t>(cat.size()), n_cat,
                             rows.mutable_data(), no_corr.mutable_data());
        return py::make_tuple(rows, no_corr);
      },
      py::arg("cat"), py::arg("correlation"), py::arg("n_cat"),
      "(rows per cat code, rows per cat code without a correlation) of one file's scanner "
      "columns, n_cat entries each (IndexError for a code outside them).");
  m.attr("kineto_convert_threads_min") = kineto::kConvertThreadsMin;
  m.attr("kineto_prefault_min") = kineto::kPrefaultMin;
}

}  // namespace stallscope::bindings
