// ArrowColumn: a column built in C++ (csrc/arrow/column_export.h) as a Python object with the
// Arrow PyCapsule interface (__arrow_c_array__), so pl.Series(obj) takes it without NumPy.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "arrow/column_export.h"

namespace stallscope::bindings {

struct ArrowColumn {
  std::shared_ptr<const arrow::Column> col;
};

}  // namespace stallscope::bindings
