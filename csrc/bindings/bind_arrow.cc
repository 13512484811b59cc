// Columns for Polars through the Arrow C data interface: NumPy arrays copied into Arrow buffers,
// and string columns gathered from a table by code. pl.Series(numpy array) would import
// numpy.ma (about 20 ms in a fresh process) and check for masks on every call; this does not.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "arrow/column_export.h"
#include "arrow/dictionary_indices.h"
#include "arrow/string_codes.h"
#include "bindings/arrow_column.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

constexpr char kSchemaCapsule[] = "arrow_schema";  // names the PyCapsule interface requires
constexpr char kArrayCapsule[] = "arrow_array";

// Releases the struct unless the consumer moved it out (release == null), then frees it.
template <typename T>
void free_struct(T* p) {
  if (p->release != nullptr) p->release(p);
  delete p;
}

template <typename T, const char* Name>
void capsule_free(PyObject* capsule) {
  auto* p = static_cast<T*>(PyCapsule_GetPointer(capsule, Name));
  if (p == nullptr) {
    PyErr_Clear();
    return;
  }
  free_struct(p);
}

// A capsule owning `p` (freed with it); on failure `p` is freed and the Python error raised.
template <typename T, const char* Name>
py::object capsule(T* p) {
  PyObject* c = PyCapsule_New(p, Name, &capsule_free<T, Name>);
  if (c == nullptr) {
    free_struct(p);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(c);
}

py::tuple arrow_c_array(const ArrowColumn& self, const py::object& requested_schema) {
  if (!requested_schema.is_none()) {
    throw py::value_error("ArrowColumn: a requested schema is not supported (cast afterwards)");
  }
  auto* schema = new ArrowSchema();
  auto* array = new ArrowArray();
  arrow::export_column(self.col, schema, array);
  py::object s;
  try {
    s = capsule<ArrowSchema, kSchemaCapsule>(schema);
  } catch (...) {
    free_struct(array);
    throw;
  }
  return py::make_tuple(s, capsule<ArrowArray, kArrayCapsule>(array));
}

// The SharedBuffer behind an array made by owned_array (or a view of one), else null.
// Only read-only arrays: Polars must never see its memory change.
const arrow::SharedBuffer* shared_buffer(const py::array& arr) {
  if (arr.writeable()) return nullptr;
  py::object base = arr.base();
  if (!base || !PyCapsule_IsValid(base.ptr(), kSharedBufferCapsule)) return nullptr;
  return static_cast<const arrow::SharedBuffer*>(
      PyCapsule_GetPointer(base.ptr(), kSharedBufferCapsule));
}

ArrowColumn from_numpy(const py::array& arr, std::string name) {
  if (arr.ndim() != 1) throw py::value_error("arrow_numeric: expected a 1-D array");
  if (!(arr.flags() & py::array::c_style)) {
    throw py::value_error("arrow_numeric: expected a contiguous array (np.ascontiguousarray)");
  }
  const py::dtype dt = arr.dtype();
  const std::string format = arrow::numeric_format(dt.kind(), static_cast<size_t>(dt.itemsize()));
  if (format.empty() || dt.byteorder() == '>') {
    throw py::type_error("arrow_numeric: no Arrow type for NumPy dtype " +
                         py::str(dt).cast<std::string>());
  }
  const void* data = arr.data();
  const auto n = static_cast<size_t>(arr.size());
  const auto item = static_cast<size_t>(dt.itemsize());
  std::shared_ptr<const arrow::Column> col;
  if (const arrow::SharedBuffer* buf = shared_buffer(arr); buf != nullptr && format != "b") {
    const auto* p = static_cast<const uint8_t*>(data);
    if (p >= buf->begin && p + n * item <= buf->begin + buf->bytes) {
      col = arrow::numeric_shared(format, *buf, data, n);  // the extension's own memory
    }
  }
  if (col == nullptr) {
    py::gil_scoped_release nogil;
    col = arrow::numeric(format, data, n, item);
  }
  std::const_pointer_cast<arrow::Column>(col)->name = std::move(name);
  return ArrowColumn{std::move(col)};
}

// gather_strings of codes already of their C type (no copy), the GIL released.
template <typename T, int Flags>
std::shared_ptr<const arrow::Column> gather(const std::vector<std::string>& table,
                                            const py::array_t<T, Flags>& codes, std::string name) {
  const auto n = static_cast<size_t>(codes.size());
  py::gil_scoped_release nogil;
  return arrow::gather_strings(table, codes.data(), n, std::move(name));
}

// int32 codes are read as they are (the importer's name codes); any other integer array as
// int64 (a copy where it is not one).
ArrowColumn strings(const std::vector<std::string>& table, const py::array& codes,
                    std::string name) {
  if (codes.ndim() != 1) throw py::value_error("arrow_strings: expected 1-D codes");
  std::shared_ptr<const arrow::Column> col;
  if (py::isinstance<py::array_t<int32_t>>(codes) && (codes.flags() & py::array::c_style) != 0) {
    col = gather(table, py::array_t<int32_t>::ensure(codes), std::move(name));
  } else {
    const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(codes);
    if (!c) throw py::type_error("arrow_strings: codes must be an integer array");
    col = gather(table, c, std::move(name));
  }
  return ArrowColumn{std::move(col)};
}

ArrowColumn enum_column(const py::array& codes, const std::vector<std::string>& categories,
                        std::string name) {
  if (codes.dtype().kind() != 'u' || codes.dtype().itemsize() != 1) {
    throw py::type_error("arrow_enum: codes must be a uint8 array");
  }
  ArrowColumn c = from_numpy(codes, std::move(name));
  return ArrowColumn{arrow::polars_enum(c.col, categories)};  // invalid_argument: ValueError
}

// The stream of a column with __arrow_c_stream__ (a Polars Series), checked.
ArrowArrayStream* column_stream(const py::object& column, py::object* cap, const char* who) {
  if (!py::hasattr(column, "__arrow_c_stream__")) {
    throw py::type_error(std::string(who) +
                         ": expected a column with __arrow_c_stream__ (a Polars Series)");
  }
  *cap = column.attr("__arrow_c_stream__")();
  auto* stream =
      static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(cap->ptr(), "arrow_array_stream"));
  if (stream == nullptr) throw py::error_already_set();
  return stream;
}

// The stream's error for a failed call: "<who>: <what> failed (<rc>): <its last error>".
[[noreturn]] void stream_fail(ArrowArrayStream* stream, const char* who, const char* what, int rc) {
  const char* why = stream->get_last_error != nullptr ? stream->get_last_error(stream) : nullptr;
  throw std::runtime_error(std::string(who) + ": " + what + " failed (" + std::to_string(rc) +
                           "): " + (why != nullptr ? why : "no message"));
}

// A stream's Arrow format string, and whether its values are dictionary-encoded.
struct StreamType {
  std::string format;
  bool dictionary;
};

StreamType stream_type(ArrowArrayStream* stream, const char* who) {
  ArrowSchema schema{};
  if (int rc = stream->get_schema(stream, &schema); rc != 0) {
    stream_fail(stream, who, "get_schema", rc);
  }
  StreamType t{schema.format != nullptr ? schema.format : "", schema.dictionary != nullptr};
  schema.release(&schema);
  return t;
}

// Chunks taken from a stream, released together when this goes (their buffers stay valid
// until then).
struct HeldChunks {
  std::vector<ArrowArray> c;
  HeldChunks() = default;
  HeldChunks(const HeldChunks&) = delete;
  HeldChunks& operator=(const HeldChunks&) = delete;
  ~HeldChunks() {
    for (ArrowArray& a : c) {
      if (a.release != nullptr) a.release(&a);
    }
  }
  // The stream's next chunk, held; nullptr at the stream's end.
  const ArrowArray* next(ArrowArrayStream* stream, const char* who) {
    // Room first, before the chunk is taken: push_back then cannot throw and leak it.
    if (c.size() == c.capacity()) c.reserve(std::max<size_t>(4, 2 * c.size()));
    ArrowArray a{};
    if (int rc = stream->get_next(stream, &a); rc != 0) stream_fail(stream, who, "get_next", rc);
    if (a.release == nullptr) return nullptr;
    c.push_back(a);
    return &c.back();
  }
};

// (codes, first rows) of a string column given as any object with __arrow_c_stream__ (a Polars
// Series): see arrow::StringCoder.
py::tuple string_codes(const py::object& column) {
  const auto n = static_cast<size_t>(py::len(column));
  py::object cap;
  ArrowArrayStream* stream = column_stream(column, &cap, "string_codes");
  const std::string format = stream_type(stream, "string_codes").format;
  // Every chunk stays alive until the coder is done: its distinct strings are views into them.
  HeldChunks chunks;
  py::array_t<uint32_t> codes(static_cast<py::ssize_t>(n));
  uint32_t* out = codes.mutable_data();
  arrow::StringCoder coder;
  size_t done = 0;
  while (const ArrowArray* next = chunks.next(stream, "string_codes")) {
    const auto len = static_cast<size_t>(next->length);
    if (done + len > n) throw std::runtime_error("string_codes: more rows than the column holds");
    {
      py::gil_scoped_release nogil;  // std::invalid_argument reaches Python as ValueError
      coder.add(format, *next, out + done);
    }
    done += len;
  }
  if (done != n) throw std::runtime_error("string_codes: fewer rows than the column holds");
  const std::vector<int64_t>& first = coder.first_rows();
  py::array_t<int64_t> first_rows(static_cast<py::ssize_t>(first.size()));
  std::copy(first.begin(), first.end(), first_rows.mutable_data());
  py::list values(coder.values().size());
  size_t i = 0;
  for (std::string_view v : coder.values()) {  // the chunks are still held: the views are valid
    PyObject* str = PyUnicode_DecodeUTF8(v.data(), static_cast<py::ssize_t>(v.size()), "strict");
    if (str == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(values.ptr(), static_cast<py::ssize_t>(i++), str);
  }
  return py::make_tuple(codes, first_rows, values);
}

// (rows int64, codes uint32, values list[str]) of a string column's rows whose kind code is
// marked in `kinds`: string_codes of those rows only, the others never read.
py::tuple string_codes_where(const py::object& column,
                             const py::array_t<uint8_t, py::array::c_style>& kind,
                             const py::array_t<uint8_t, py::array::c_style>& kinds) {
  const auto n = static_cast<size_t>(py::len(column));
  if (kind.ndim() != 1 || static_cast<size_t>(kind.size()) != n) {
    throw py::value_error("string_codes_where: kind has the wrong length");
  }
  const uint8_t* k = kind.data();
  const uint8_t* mark = kinds.data();
  const auto n_kinds = static_cast<size_t>(kinds.size());
  std::vector<int64_t> rows;
  {
    py::gil_scoped_release nogil;
    for (size_t i = 0; i < n; ++i) {
      if (k[i] < n_kinds && mark[k[i]]) rows.push_back(static_cast<int64_t>(i));
    }
  }
  py::object cap;
  ArrowArrayStream* stream = column_stream(column, &cap, "string_codes_where");
  const std::string format = stream_type(stream, "string_codes_where").format;
  HeldChunks chunks;
  std::vector<uint32_t> codes(rows.size());
  std::vector<int64_t> local;
  arrow::StringCoder coder;
  size_t done = 0, j = 0;
  while (const ArrowArray* next = chunks.next(stream, "string_codes_where")) {
    const auto len = static_cast<size_t>(next->length);
    if (done + len > n) {
      throw std::runtime_error("string_codes_where: more rows than the column holds");
    }
    local.clear();
    const size_t j0 = j;
    for (; j < rows.size() && static_cast<size_t>(rows[j]) < done + len; ++j) {
      local.push_back(rows[j] - static_cast<int64_t>(done));
    }
    {
      py::gil_scoped_release nogil;
      coder.add_rows(format, *next, local.data(), local.size(), codes.data() + j0);
    }
    done += len;
  }
  if (done != n) throw std::runtime_error("string_codes_where: fewer rows than the column holds");
  py::list values(coder.values().size());
  size_t i = 0;
  for (std::string_view v : coder.values()) {
    PyObject* str = PyUnicode_DecodeUTF8(v.data(), static_cast<py::ssize_t>(v.size()), "strict");
    if (str == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(values.ptr(), static_cast<py::ssize_t>(i++), str);
  }
  return py::make_tuple(owned_array(std::move(rows)), owned_array(std::move(codes)), values);
}

// The indices of a dictionary column (a Polars Enum or Categorical: its physical codes) as a
// NumPy array, `null_code` where null: uint8 when `categories` <= 256, else uint32. Read
// through the Arrow C stream: no Polars query, whose first use costs a fresh process ~3 ms.
template <typename T>
py::array_t<T> read_codes(ArrowArrayStream* stream, char format, size_t n, int64_t null_code,
                          int64_t categories) {
  py::array_t<T> codes(static_cast<py::ssize_t>(n));
  T* out = codes.mutable_data();
  size_t done = 0;
  for (;;) {
    ArrowArray a{};
    if (int rc = stream->get_next(stream, &a); rc != 0) {
      stream_fail(stream, "dictionary_codes", "get_next", rc);
    }
    if (a.release == nullptr) break;
    struct Release {
      ArrowArray& a;
      ~Release() { a.release(&a); }
    } release{a};
    const auto len = static_cast<size_t>(a.length);
    if (done + len > n) throw std::runtime_error("dictionary_codes: more rows than the column");
    arrow::dictionary_indices(format, a, null_code, categories, out + done);
    done += len;
  }
  if (done != n) throw std::runtime_error("dictionary_codes: fewer rows than the column");
  return codes;
}

py::array dictionary_codes(const py::object& column, int64_t categories, int64_t null_code) {
  const auto n = static_cast<size_t>(py::len(column));
  const int64_t limit = categories <= 256 ? 255 : std::numeric_limits<uint32_t>::max();
  if (categories < 0 || null_code < 0 || null_code > limit) {
    throw py::value_error("dictionary_codes: categories or null_code out of range");
  }
  py::object cap;
  ArrowArrayStream* stream = column_stream(column, &cap, "dictionary_codes");
  const auto [format, is_dict] = stream_type(stream, "dictionary_codes");
  if (!is_dict || format.size() != 1 ||
      std::string("cCsSiIlL").find(format[0]) == std::string::npos) {
    throw py::type_error(
        "dictionary_codes: expected a dictionary column (a Polars Enum), got "
        "Arrow format '" +
        format + "'");
  }
  if (categories <= 256) return read_codes<uint8_t>(stream, format[0], n, null_code, categories);
  return read_codes<uint32_t>(stream, format[0], n, null_code, categories);
}

// The identity of a one-chunk column's data (a Polars Series, through its Arrow C stream):
// (format, length, offset, null count, then each buffer's address), or None for a column of
// several chunks (or none). While a column is alive no other holds buffers at its addresses,
// and Arrow buffers are immutable: equal keys of two live columns mean the same values (a view
// column's data buffers are named too, so the same views into the same bytes).
py::object column_key(const py::object& column) {
  py::object cap;
  ArrowArrayStream* stream = column_stream(column, &cap, "column_key");
  const std::string format = stream_type(stream, "column_key").format;
  HeldChunks chunks;
  const ArrowArray* first = chunks.next(stream, "column_key");
  if (first == nullptr || chunks.next(stream, "column_key") != nullptr) return py::none();
  const ArrowArray& a = chunks.c.front();
  // A view column's last buffer (its data buffers' sizes) is made for each export: left out.
  const bool views = format == "vu" || format == "vz";
  const int64_t n_buffers = views && a.n_buffers > 0 ? a.n_buffers - 1 : a.n_buffers;
  py::tuple key(static_cast<size_t>(4 + n_buffers));
  key[0] = py::str(format);
  key[1] = py::int_(a.length);
  key[2] = py::int_(a.offset);
  key[3] = py::int_(a.null_count);
  for (int64_t i = 0; i < n_buffers; ++i) {
    key[static_cast<size_t>(4 + i)] = py::int_(reinterpret_cast<uintptr_t>(a.buffers[i]));
  }
  return std::move(key);
}

}  // namespace

void bind_arrow(py::module_& m) {
  py::class_<ArrowColumn>(m, "ArrowColumn",
                          "A column in Arrow buffers owned by the extension; pl.Series(col) "
                          "takes it through the Arrow PyCapsule interface.")
      .def("__arrow_c_array__", &arrow_c_array, py::arg("requested_schema") = py::none(),
           "(schema capsule, array capsule) of the Arrow C data interface.")
      .def("__len__", [](const ArrowColumn& self) { return self.col->length; })
      .def_property_readonly("format", [](const ArrowColumn& self) { return self.col->format; })
      .def_property_readonly("null_count",
                             [](const ArrowColumn& self) { return self.col->null_count; });
  m.def("arrow_numeric", &from_numpy, py::arg("values"), py::arg("name") = "",
        "A copy of a 1-D contiguous NumPy array (bool, int, uint, float) as an ArrowColumn.");
  m.def("arrow_strings", &strings, py::arg("table"), py::arg("codes"), py::arg("name") = "",
        "Row i = table[codes[i]] (null where the code is negative) as a UTF-8 view column.");
  m.def("arrow_enum", &enum_column, py::arg("codes"), py::arg("categories"), py::arg("name") = "",
        "uint8 codes into `categories` as a dictionary column that Polars reads as "
        "pl.Enum(categories) (its field metadata); the codes are shared when the array is the "
        "extension's own read-only storage, else copied.");
  m.def("dictionary_codes", &dictionary_codes, py::arg("column"), py::arg("categories"),
        py::arg("null_code") = 0,
        "The indices of a dictionary column of `categories` values (a Polars Enum: its "
        "physical codes) as NumPy: uint8 up to 256 categories, else uint32; null_code where "
        "null. Read through the Arrow C stream, not a Polars query.");
  m.def("column_key", &column_key, py::arg("column"),
        "(format, length, offset, null count, buffer addresses...) of a one-chunk column (a "
        "Polars Series), None for several chunks: equal for two live columns only when they "
        "share their buffers, hence their values.");
  m.def("string_codes", &string_codes, py::arg("column"),
        "(codes uint32, first_rows int64, values list[str]) of a string column (a Polars "
        "Series): equal strings share a code, codes count from 0 in order of first appearance, "
        "null counts as \"\"; first_rows[code] is the row where the code first appears, "
        "values[code] its string.");
  m.def("string_codes_where", &string_codes_where, py::arg("column"), py::arg("kind"),
        py::arg("kinds"),
        "(rows int64, codes uint32, values list[str]): string_codes of the rows of a string "
        "column whose kind code (uint8 per row) is marked in `kinds` (uint8 per kind code); "
        "the other rows are not read.");
}

}  // namespace stallscope::bindings
