// The indices of a dictionary column's chunk (a Polars Enum or Categorical: its physical codes),
// read from the Arrow C data interface into an array of the caller's index type.
#pragma once

#include <cstdint>

#include "arrow/arrow_c_abi.h"

namespace stallscope::arrow {

// Writes the a.length indices of chunk `a` to out[0 .. a.length), `null_code` where null.
// format: the Arrow format of the index type, one of "c C s S i I l L" (the caller checks the
// schema). std::runtime_error when the chunk has no indices buffer, when its dictionary is not
// of `categories` values, or when a valid index is outside [0, categories). T: uint8_t or
// uint32_t.
template <typename T>
void dictionary_indices(char format, const ArrowArray& a, int64_t null_code, int64_t categories,
                        T* out);

extern template void dictionary_indices<uint8_t>(char, const ArrowArray&, int64_t, int64_t,
                                                 uint8_t*);
extern template void dictionary_indices<uint32_t>(char, const ArrowArray&, int64_t, int64_t,
                                                  uint32_t*);

}  // namespace stallscope::arrow
