// The record layout and enum names, exported so a test can check _schema.py mirrors them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/event_record.h"

namespace py = pybind11;

namespace stallscope::bindings {

void bind_schema(py::module_& m) {
  std::vector<std::string> kinds(kKindNames, kKindNames + kNumKinds);
  std::vector<std::string> cats(kCategoryNames, kCategoryNames + kNumCategories);
  m.attr("KIND_NAMES") = kinds;
  m.attr("CATEGORY_NAMES") = cats;
  m.attr("RECORD_SIZE") = sizeof(EventRecord);
  py::dict offsets;
#define STALLSCOPE_FIELD(f) offsets[#f] = py::int_(offsetof(EventRecord, f))
  STALLSCOPE_FIELD(start_ns);
  STALLSCOPE_FIELD(end_ns);
  STALLSCOPE_FIELD(correlation);
  STALLSCOPE_FIELD(bytes);
  STALLSCOPE_FIELD(name_id);
  STALLSCOPE_FIELD(detail_id);
  STALLSCOPE_FIELD(lane);
  STALLSCOPE_FIELD(device);
  STALLSCOPE_FIELD(kind);
  STALLSCOPE_FIELD(category);
#undef STALLSCOPE_FIELD
  m.attr("RECORD_OFFSETS") = offsets;
}

}  // namespace stallscope::bindings
