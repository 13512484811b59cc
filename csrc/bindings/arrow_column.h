// ArrowColumn: a column built in C++ (csrc/arrow/column_export.h) as a Python object with the
// Arrow PyCapsule interface (__arrow_c_array__), so pl.Series(obj) takes it without NumPy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "arrow/column_export.h"

namespace stallscope::bindings {

struct ArrowColumn {
  std::shared_ptr<const arrow::Column> col;
};

// Name of the capsule that owns a SharedBuffer as the base of a NumPy array (owned_array).
inline constexpr const char* kSharedBufferCapsule = "stallscope.shared_buffer";

// A NumPy array of the n values at `data`, inside storage that `owner` keeps alive (no copy).
// Its base is a capsule holding the storage as an arrow::SharedBuffer. A read-only one
// (`writeable` false) is handed to Polars by arrow_numeric() without a copy (a writeable one
// could change under Polars: it is copied), and Polars' release of it does not need the GIL.
template <typename T>
pybind11::array_t<T> shared_array(std::shared_ptr<const void> owner, const T* data, size_t n,
                                  bool writeable) {
  auto* buf = new arrow::SharedBuffer{std::move(owner), reinterpret_cast<const uint8_t*>(data),
                                      n * sizeof(T)};
  pybind11::capsule cap(buf, kSharedBufferCapsule,
                        [](void* p) { delete static_cast<arrow::SharedBuffer*>(p); });
  pybind11::array_t<T> out(static_cast<pybind11::ssize_t>(n), data, cap);
  if (!writeable) {
    pybind11::detail::array_proxy(out.ptr())->flags &=
        ~pybind11::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  }
  return out;
}

// shared_array over the vector's storage.
template <typename T>
pybind11::array_t<T> owned_array(std::vector<T>&& v, bool writeable = true) {
  auto vec = std::make_shared<const std::vector<T>>(std::move(v));
  return shared_array<T>(vec, vec->data(), vec->size(), writeable);
}

}  // namespace stallscope::bindings
