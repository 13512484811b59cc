#include "arrow/dictionary_indices.h"

#include <cstddef>
#include <stdexcept>

namespace stallscope::arrow {

namespace {

// A chunk's indices into `out` as T, `null_code` where null (`valid`: its validity bitmap, null
// when it has no nulls), in one pass typed by the index type I: false when a valid index is
// outside [0, categories).
template <typename I, typename T>
bool copy_indices(const ArrowArray& a, const uint8_t* valid, int64_t null_code, int64_t categories,
                  T* out) {
  const I* p = static_cast<const I*>(a.buffers[1]) + a.offset;
  const auto len = static_cast<size_t>(a.length);
  bool bad = false;
  for (size_t i = 0; i < len; ++i) {
    const int64_t at = a.offset + static_cast<int64_t>(i);
    const bool ok = valid == nullptr || ((valid[at >> 3] >> (at & 7)) & 1);
    const auto v = ok ? static_cast<int64_t>(p[i]) : null_code;  // uint64 past int64: negative
    bad |= ok && (v < 0 || v >= categories);
    out[i] = static_cast<T>(v);
  }
  return !bad;
}

// copy_indices for the index type of `format` (one of c C s S i I l L).
template <typename T>
bool copy_indices(char format, const ArrowArray& a, const uint8_t* valid, int64_t null_code,
                  int64_t categories, T* out) {
  switch (format) {
    case 'c':
      return copy_indices<int8_t>(a, valid, null_code, categories, out);
    case 'C':
      return copy_indices<uint8_t>(a, valid, null_code, categories, out);
    case 's':
      return copy_indices<int16_t>(a, valid, null_code, categories, out);
    case 'S':
      return copy_indices<uint16_t>(a, valid, null_code, categories, out);
    case 'i':
      return copy_indices<int32_t>(a, valid, null_code, categories, out);
    case 'I':
      return copy_indices<uint32_t>(a, valid, null_code, categories, out);
    case 'l':
      return copy_indices<int64_t>(a, valid, null_code, categories, out);
    case 'L':
      return copy_indices<uint64_t>(a, valid, null_code, categories, out);
    default:
      throw std::runtime_error("dictionary_codes: an index type that is not an integer");
  }
}

}  // namespace

template <typename T>
void dictionary_indices(char format, const ArrowArray& a, int64_t null_code, int64_t categories,
                        T* out) {
  if (a.n_buffers < 2 || (a.length > 0 && a.buffers[1] == nullptr)) {
    throw std::runtime_error("dictionary_codes: a chunk without its indices buffer");
  }
  if (a.dictionary == nullptr || a.dictionary->length != categories) {
    throw std::runtime_error("dictionary_codes: a chunk's dictionary is not the categories");
  }
  // No bitmap to read where there are no nulls: the typed loop then has no per-row test.
  const auto* valid = a.null_count == 0 ? nullptr : static_cast<const uint8_t*>(a.buffers[0]);
  if (!copy_indices(format, a, valid, null_code, categories, out)) {
    throw std::runtime_error("dictionary_codes: an index past the dictionary");
  }
}

template void dictionary_indices<uint8_t>(char, const ArrowArray&, int64_t, int64_t, uint8_t*);
template void dictionary_indices<uint32_t>(char, const ArrowArray&, int64_t, int64_t, uint32_t*);

}  // namespace stallscope::arrow
