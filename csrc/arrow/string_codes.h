// Codes of the distinct strings of an Arrow string column. The analysis tests and groups names
// per distinct value (a trace of 100 k rows has a few hundred names) instead of per row.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "arrow/arrow_c_abi.h"

namespace stallscope::arrow {

// Gives every row a code: equal strings get equal codes, codes count up from 0 in the order of
// first appearance, and a null row counts as "" (the importer's rule for a missing name). Chunks
// are added in row order; the caller keeps every added chunk alive until it is done with the
// coder (the distinct strings are views into them).
class StringCoder {
 public:
  // Codes one chunk (array.length rows) into out[0 .. array.length). format: "vu" (UTF-8 view),
  // "u" or "U" (UTF-8 with 32- / 64-bit offsets); std::invalid_argument for any other.
  void add(std::string_view format, const ArrowArray& array, uint32_t* out);
  // Codes only the chunk's rows rows[0 .. k) (positions in the chunk) into out[0 .. k); the
  // chunk still counts all of its rows.
  void add_rows(std::string_view format, const ArrowArray& array, const int64_t* rows, size_t k,
                uint32_t* out);

  // code -> the row (counted over all chunks added) where it first appears
  const std::vector<int64_t>& first_rows() const { return first_rows_; }
  // code -> its string ("" for null), a view into the chunk where it first appears
  const std::vector<std::string_view>& values() const { return values_; }

 private:
  struct Slot {
    uint64_t a = 0;  // length, and the first 4 bytes of a string of up to 12
    uint64_t b = 0;  // its other 8 bytes; for a longer one the address of its bytes
    uint32_t code = kEmpty;
  };
  static constexpr uint32_t kEmpty = UINT32_MAX;

  void code_rows(std::string_view format, const ArrowArray& array, const int64_t* rows, size_t k,
                 uint32_t* out);
  uint32_t by_content(std::string_view s, int64_t row);
  uint32_t by_view(const uint8_t* view, const ArrowArray& array, int64_t row);
  void grow();

  // A view's 16 bytes identify its string when the column stores each distinct string once (the
  // importer's columns): one probe per row, the string's bytes read once per distinct view. Where
  // the views are mostly distinct while the strings are not (each row its own copy), the table is
  // dropped and every row hashed by content.
  std::vector<Slot> views_;
  size_t view_count_ = 0;
  bool by_views_ = true;
  std::unordered_map<std::string_view, uint32_t> content_;
  std::vector<int64_t> first_rows_;
  std::vector<std::string_view> values_;
  int64_t rows_ = 0;  // rows added so far
};

}  // namespace stallscope::arrow
