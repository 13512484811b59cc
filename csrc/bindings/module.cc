// The _core extension: bindings split by area, one file each.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace stallscope::bindings {
void bind_schema(py::module_& m);
void bind_clock(py::module_& m);
void bind_collector(py::module_& m);
void bind_recording(py::module_& m);
void bind_fast_api(py::module_& m);
void bind_cupti(py::module_& m);
void bind_kineto(py::module_& m);
void bind_arrow(py::module_& m);
void bind_analysis(py::module_& m);
void bind_predict(py::module_& m);
}  // namespace stallscope::bindings

PYBIND11_MODULE(_core, m) {
  m.doc() = "stallscope native capture core (private: use the stallscope package)";
  stallscope::bindings::bind_schema(m);
  stallscope::bindings::bind_clock(m);
  stallscope::bindings::bind_collector(m);
  stallscope::bindings::bind_recording(m);
  stallscope::bindings::bind_fast_api(m);
  stallscope::bindings::bind_cupti(m);
  stallscope::bindings::bind_kineto(m);
  stallscope::bindings::bind_arrow(m);
  stallscope::bindings::bind_analysis(m);
  stallscope::bindings::bind_predict(m);
}
