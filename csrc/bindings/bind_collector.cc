// Ring pool configuration, draining into NumPy columns, string table and drop statistics.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/collector.h"
#include "core/string_table.h"
#include "core/thread_registry.h"

namespace py = pybind11;

namespace stallscope::bindings {

namespace {

// NumPy array viewing v's memory; base keeps the owning chunk alive.
template <class T>
py::array view(Column<T>& v, const py::object& base) {
  return py::array_t<T>({static_cast<py::ssize_t>(v.size())}, {static_cast<py::ssize_t>(sizeof(T))},
                        v.data(), base);
}

py::dict drain(uint64_t max_events) {
  auto* chunk = new ColumnChunk();
  {
    py::gil_scoped_release release;
    *chunk = Collector::drain(max_events);
  }
  py::capsule owner(chunk, [](void* p) { delete static_cast<ColumnChunk*>(p); });
  py::dict d;
  d["start_ns"] = view(chunk->start_ns, owner);
  d["end_ns"] = view(chunk->end_ns, owner);
  d["correlation"] = view(chunk->correlation, owner);
  d["bytes"] = view(chunk->bytes, owner);
  d["name_id"] = view(chunk->name_id, owner);
  d["detail_id"] = view(chunk->detail_id, owner);
  d["lane"] = view(chunk->lane, owner);
  d["device"] = view(chunk->device, owner);
  d["kind"] = view(chunk->kind, owner);
  d["category"] = view(chunk->category, owner);
  return d;
}

}  // namespace

void bind_collector(py::module_& m) {
  m.def(
      "configure",
      [](uint32_t max_threads, uint64_t ring_capacity) {
        if (g_registry.enabled()) throw std::runtime_error("configure() while recording");
        if (!g_registry.configure(max_threads, ring_capacity)) {
          throw std::runtime_error(
              "could not allocate the ring pool (max_threads x ring_capacity x 48 bytes)");
        }
      },
      py::arg("max_threads"), py::arg("ring_capacity"),
      "Allocate the pool: max_threads rings of ring_capacity events (rounded up to a power of "
      "two).");
  m.def("configured", [] { return g_registry.configured(); });
  m.def("ring_capacity", [] { return g_registry.ring_capacity(); });
  m.def("max_threads", [] { return g_registry.max_threads(); });
  m.def(
      "set_recording", [](bool on) { g_registry.set_enabled(on && g_registry.configured()); },
      py::arg("on"));
  m.def("recording", [] { return g_registry.enabled(); });
  m.def("drain", &drain, py::arg("max_events") = ~0ULL,
        "Move buffered events into a dict of NumPy columns (releases the GIL while copying).");
  m.def("buffered", [] { return Collector::buffered(); });
  m.def("discard", [] {
    py::gil_scoped_release release;
    return Collector::discard();
  });
  m.def("intern", [](const std::string& s) { return StringTable::instance().intern(s); });
  m.def(
      "strings_from", [](uint32_t first) { return StringTable::instance().strings_from(first); },
      py::arg("first") = 0);
  m.def("string_count", [] { return StringTable::instance().size(); });
  m.def("thread_stats", [] {
    std::lock_guard<std::mutex> guard(Collector::lock());
    py::list out;
    for (const ThreadStats& s : g_registry.stats()) {
      py::dict d;
      d["tid"] = s.tid;
      d["thread_name"] = s.thread_name;
      d["recorded"] = s.recorded;
      d["dropped"] = s.dropped;
      d["buffered"] = s.buffered;
      d["live"] = s.live;
      out.append(d);
    }
    return out;
  });
  m.def("reset_stats", [] {
    std::lock_guard<std::mutex> guard(Collector::lock());
    g_registry.reset_stats();
  });
  m.def(
      "no_slot_drops", [] { return g_registry.no_slot_drops(); },
      "Events dropped because every ring of the pool was taken by other threads.");
}

}  // namespace stallscope::bindings
