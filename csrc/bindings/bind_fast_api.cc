// The Python hot path, written against the CPython API directly: a region enter + exit is two
// C calls with no argument parsing, so its cost is the clock reads and one ring push.
//   Region(name, category=0, kind=0): __enter__ / __exit__ (nestable, per-thread stack)
//   step() -> int, mark(name), counter(name, value)
#include <Python.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstring>
#include <string_view>

#include "core/clock.h"
#include "core/event_record.h"
#include "core/recorder.h"
#include "core/string_table.h"
#include "cupti/ext_correlation.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

// Per-thread stack of open region start times (ns). Deeper nesting is not recorded (counted).
constexpr int kMaxDepth = 256;
thread_local int64_t t_starts[kMaxDepth];
thread_local int t_depth = 0;
std::atomic<uint64_t> g_too_deep{0};
std::atomic<int64_t> g_step{0};
uint32_t g_step_name = 0;

// str -> id cache in front of the string table: a dict lookup under the GIL (the str's hash is
// cached in the object), so recording a known name takes no lock. Only a name seen for the first
// time goes to StringTable::intern (lock + allocation).
PyObject* g_name_ids = nullptr;

uint32_t intern_str(PyObject* s) {
  PyObject* cached = PyDict_GetItemWithError(g_name_ids, s);  // borrowed
  if (cached != nullptr) return static_cast<uint32_t>(PyLong_AsUnsignedLong(cached));
  if (PyErr_Occurred()) return UINT32_MAX;
  Py_ssize_t len = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &len);
  if (p == nullptr) return UINT32_MAX;
  const uint32_t id = StringTable::instance().intern(std::string_view(p, static_cast<size_t>(len)));
  PyObject* v = PyLong_FromUnsignedLong(id);
  if (v == nullptr || PyDict_SetItem(g_name_ids, s, v) < 0) {
    Py_XDECREF(v);
    return UINT32_MAX;
  }
  Py_DECREF(v);
  return id;
}

int parse_category(PyObject* c, uint8_t* out) {
  if (PyLong_Check(c)) {
    long v = PyLong_AsLong(c);
    if (v < 0 || v >= kNumCategories) {
      PyErr_Format(PyExc_ValueError, "category %ld out of range 0..%d", v, kNumCategories - 1);
      return -1;
    }
    *out = static_cast<uint8_t>(v);
    return 0;
  }
  if (PyUnicode_Check(c)) {
    const char* s = PyUnicode_AsUTF8(c);
    if (s == nullptr) return -1;
    for (int i = 0; i < kNumCategories; ++i) {
      if (std::strcmp(s, kCategoryNames[i]) == 0) {
        *out = static_cast<uint8_t>(i);
        return 0;
      }
    }
    PyErr_Format(PyExc_ValueError,
                 "unknown category %R: use one of host, compute, memcpy, comm, data, data_fetch, "
                 "data_prep, sync, other",
                 c);
    return -1;
  }
  PyErr_SetString(PyExc_TypeError, "category must be a str or an int");
  return -1;
}

struct RegionObject {
  PyObject_HEAD PyObject* name;  // str
  uint32_t name_id;
  uint8_t category;
  uint8_t kind;
};

int region_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"name", "category", "kind", nullptr};
  PyObject* name = nullptr;
  PyObject* cat = nullptr;
  int kind = static_cast<int>(Kind::kRegion);
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|Oi", const_cast<char**>(kw), &name, &cat,
                                   &kind)) {
    return -1;
  }
  auto* r = reinterpret_cast<RegionObject*>(self);
  uint8_t c = static_cast<uint8_t>(Category::kHost);
  if (cat != nullptr && cat != Py_None && parse_category(cat, &c) < 0) return -1;
  if (kind < 0 || kind >= kNumKinds) {
    PyErr_Format(PyExc_ValueError, "kind %d out of range", kind);
    return -1;
  }
  const uint32_t id = intern_str(name);
  if (id == UINT32_MAX) return -1;
  Py_INCREF(name);
  Py_XSETREF(r->name, name);
  r->name_id = id;
  r->category = c;
  r->kind = static_cast<uint8_t>(kind);
  return 0;
}

void region_dealloc(PyObject* self) {
  auto* r = reinterpret_cast<RegionObject*>(self);
  Py_CLEAR(r->name);
  Py_TYPE(self)->tp_free(self);
}

PyObject* region_enter(PyObject* self, PyObject*) {
  const int d = t_depth++;
  cupti::ext_region_enter(d, reinterpret_cast<RegionObject*>(self)->name_id);
  if (d < kMaxDepth) t_starts[d] = clock_now_ns();
  Py_INCREF(self);
  return self;
}

PyObject* region_exit(PyObject* self, PyObject* const*, Py_ssize_t) {
  const int64_t end = clock_now_ns();
  if (t_depth > 0) {
    const int d = --t_depth;
    cupti::ext_region_exit(d);
    if (d < kMaxDepth) {
      auto* r = reinterpret_cast<RegionObject*>(self);
      record(host_event(static_cast<Kind>(r->kind), static_cast<Category>(r->category), r->name_id,
                        t_starts[d], end));
    } else if (recording()) {
      g_too_deep.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Py_RETURN_FALSE;
}

PyObject* region_get_name(PyObject* self, void*) {
  auto* r = reinterpret_cast<RegionObject*>(self);
  if (r->name == nullptr) Py_RETURN_NONE;
  Py_INCREF(r->name);
  return r->name;
}

PyObject* region_get_category(PyObject* self, void*) {
  return PyUnicode_FromString(kCategoryNames[reinterpret_cast<RegionObject*>(self)->category]);
}

PyObject* region_get_kind(PyObject* self, void*) {
  return PyUnicode_FromString(kKindNames[reinterpret_cast<RegionObject*>(self)->kind]);
}

PyMethodDef region_methods[] = {
    {"__enter__", region_enter, METH_NOARGS, "Open the region (start, ns, process clock)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(region_exit)),
     METH_FASTCALL, "Close the region and record it."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef region_getset[] = {
    {"name", region_get_name, nullptr, "region name", nullptr},
    {"category", region_get_category, nullptr, "stall category", nullptr},
    {"kind", region_get_kind, nullptr, "event kind", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject RegionType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// step(at_ns=None) -> int: records a step boundary (now, or at the given process-clock time),
// returns the new step index (1, 2, ...).
PyObject* fast_step(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t now = 0;
  if (nargs == 0 || args[0] == Py_None) {
    now = clock_now_ns();
  } else if (nargs == 1) {
    now = PyLong_AsLongLong(args[0]);
    if (now == -1 && PyErr_Occurred()) return nullptr;
  } else {
    PyErr_SetString(PyExc_TypeError, "step(at_ns: int | None = None)");
    return nullptr;
  }
  const int64_t idx = g_step.fetch_add(1, std::memory_order_relaxed) + 1;
  EventRecord e = host_event(Kind::kStep, Category::kHost, g_step_name, now, now);
  e.correlation = idx;
  record(e);
  cupti::ext_step(idx);
  return PyLong_FromLongLong(idx);
}

PyObject* fast_mark(PyObject*, PyObject* name) {
  const int64_t now = clock_now_ns();
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "mark(name): name must be a str");
    return nullptr;
  }
  if (recording()) {
    const uint32_t id = intern_str(name);
    if (id == UINT32_MAX) return nullptr;
    record(host_event(Kind::kMark, Category::kHost, id, now, now));
  }
  Py_RETURN_NONE;
}

PyObject* fast_counter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const int64_t now = clock_now_ns();
  if (nargs != 2 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "counter(name: str, value: float)");
    return nullptr;
  }
  const double v = PyFloat_AsDouble(args[1]);
  if (v == -1.0 && PyErr_Occurred()) return nullptr;
  if (recording()) {
    const uint32_t id = intern_str(args[0]);
    if (id == UINT32_MAX) return nullptr;
    EventRecord e = host_event(Kind::kCounter, Category::kHost, id, now, now);
    std::memcpy(&e.bytes, &v, sizeof v);
    record(e);
  }
  Py_RETURN_NONE;
}

// record_event(kind, category, name_id, start_ns, end_ns, correlation, bytes, lane, detail_id)
// -> bool: one host event (device -1; an end before the start is taken as the start),
// positional arguments only: the hot path of the torch.distributed instrumentation, where
// pybind11's keyword parsing of record() cost more than everything else a call does.
PyObject* fast_record_event(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr Py_ssize_t kArgs = 9;
  if (nargs != kArgs) {
    PyErr_SetString(PyExc_TypeError,
                    "record_event(kind, category, name_id, start_ns, end_ns, correlation, bytes, "
                    "lane, detail_id)");
    return nullptr;
  }
  long long v[kArgs];
  for (Py_ssize_t i = 0; i < kArgs; ++i) {
    v[i] = PyLong_AsLongLong(args[i]);
    if (v[i] == -1 && PyErr_Occurred()) return nullptr;
  }
  if (v[0] < 0 || v[0] >= kNumKinds || v[1] < 0 || v[1] >= kNumCategories || v[2] < 0 ||
      v[2] > UINT32_MAX || v[8] < 0 || v[8] > UINT32_MAX) {
    PyErr_SetString(PyExc_ValueError, "record_event: kind, category or a string id out of range");
    return nullptr;
  }
  EventRecord e{};
  e.start_ns = v[3];
  e.end_ns = v[4] < v[3] ? v[3] : v[4];
  e.correlation = v[5];
  e.bytes = v[6];
  e.name_id = static_cast<uint32_t>(v[2]);
  e.detail_id = static_cast<uint32_t>(v[8]);
  e.lane = static_cast<int32_t>(v[7]);
  e.device = -1;
  e.kind = static_cast<uint8_t>(v[0]);
  e.category = static_cast<uint8_t>(v[1]);
  return PyBool_FromLong(record(e) ? 1 : 0);
}

PyMethodDef fast_functions[] = {
    {"step", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_step)), METH_FASTCALL,
     "Record a step boundary (now, or at at_ns on the process clock); returns the step index."},
    {"mark", fast_mark, METH_O, "Record an instant marker."},
    {"counter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_counter)),
     METH_FASTCALL, "Record a counter sample."},
    {"record_event", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_record_event)),
     METH_FASTCALL, "Record one host event from positional arguments; False when off or dropped."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_fast_api(py::module_& m) {
  g_step_name = StringTable::instance().intern("step");
  g_name_ids = PyDict_New();
  if (g_name_ids == nullptr) throw py::error_already_set();
  RegionType.tp_name = "stallscope._core.Region";
  RegionType.tp_basicsize = sizeof(RegionObject);
  RegionType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  RegionType.tp_doc = "A named CPU region: a context manager recording (start, end) on exit.";
  RegionType.tp_new = PyType_GenericNew;
  RegionType.tp_init = region_init;
  RegionType.tp_dealloc = region_dealloc;
  RegionType.tp_methods = region_methods;
  RegionType.tp_getset = region_getset;
  if (PyType_Ready(&RegionType) < 0) throw py::error_already_set();
  Py_INCREF(&RegionType);
  m.add_object("Region", reinterpret_cast<PyObject*>(&RegionType));
  for (PyMethodDef* f = fast_functions; f->ml_name != nullptr; ++f) {
    PyObject* fn = PyCFunction_NewEx(f, nullptr, m.ptr());
    if (fn == nullptr) throw py::error_already_set();
    m.add_object(f->ml_name, fn);
  }
  m.def("step_index", [] { return g_step.load(std::memory_order_relaxed); });
  m.def(
      "reset_step_index", [](int64_t v) { g_step.store(v, std::memory_order_relaxed); },
      py::arg("value") = 0);
  m.def(
      "too_deep_drops", [] { return g_too_deep.load(std::memory_order_relaxed); },
      "Region exits not recorded because nesting exceeded 256 levels.");
}

}  // namespace stallscope::bindings
