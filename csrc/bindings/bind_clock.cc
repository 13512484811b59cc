#include <pybind11/pybind11.h>

#include "core/clock.h"

namespace py = pybind11;

namespace stallscope::bindings {

void bind_clock(py::module_& m) {
  m.def("now_ns", &clock_now_ns, "The process clock: ns, CLOCK_MONOTONIC.");
  m.def("realtime_ns", &clock_realtime_ns, "ns since the Unix epoch (CLOCK_REALTIME).");
}

}  // namespace stallscope::bindings
