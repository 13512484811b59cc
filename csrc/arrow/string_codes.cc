#include "arrow/string_codes.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace stallscope::arrow {

namespace {

constexpr size_t kViewLimit = 1 << 16;  // views seen before the view table may be dropped

bool valid(const ArrowArray& array, int64_t i) {
  if (array.null_count == 0 || array.buffers[0] == nullptr) return true;
  const int64_t bit = array.offset + i;
  return (static_cast<const uint8_t*>(array.buffers[0])[bit >> 3] >> (bit & 7)) & 1;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
  return h ^ (h >> 31);
}

// The string of a 16-byte UTF-8 view: length (int32), then up to 12 bytes inline, or a 4-byte
// prefix, the data buffer's index and the offset in it (int32 each).
std::string_view view_string(const uint8_t* view, const ArrowArray& array) {
  int32_t len;
  std::memcpy(&len, view, 4);
  if (len < 0) throw std::invalid_argument("string_codes: a view of negative length");
  if (len <= 12) return {reinterpret_cast<const char*>(view + 4), static_cast<size_t>(len)};
  int32_t buffer;
  int32_t offset;
  std::memcpy(&buffer, view + 8, 4);
  std::memcpy(&offset, view + 12, 4);
  // buffers: validity, views, the data buffers, then their sizes
  const auto* sizes = static_cast<const int64_t*>(array.buffers[array.n_buffers - 1]);
  if (buffer < 0 || buffer + 3 > array.n_buffers || offset < 0 ||
      static_cast<int64_t>(offset) + len > sizes[buffer]) {
    throw std::invalid_argument("string_codes: a view outside its data buffers");
  }
  return {static_cast<const char*>(array.buffers[2 + buffer]) + offset, static_cast<size_t>(len)};
}

}  // namespace

uint32_t StringCoder::by_content(std::string_view s, int64_t row) {
  auto [it, added] = content_.try_emplace(s, static_cast<uint32_t>(first_rows_.size()));
  if (added) {
    first_rows_.push_back(row);
    values_.push_back(s);
  }
  return it->second;
}

void StringCoder::grow() {
  std::vector<Slot> old(views_.empty() ? 1024 : views_.size() * 2);
  old.swap(views_);
  const size_t mask = views_.size() - 1;
  for (const Slot& s : old) {
    if (s.code == kEmpty) continue;
    size_t at = mix(s.a, s.b) & mask;
    while (views_[at].code != kEmpty) at = (at + 1) & mask;
    views_[at] = s;
  }
}

uint32_t StringCoder::by_view(const uint8_t* view, const ArrowArray& array, int64_t row) {
  const std::string_view s = view_string(view, array);
  // The key: a string of up to 12 bytes by its bytes (the view's padding left out), a longer one
  // by its length and address (lengths over 12 never equal an inline key's).
  uint64_t a = s.size();
  uint64_t b = reinterpret_cast<uintptr_t>(s.data());
  if (s.size() <= 12) {
    uint8_t in[12] = {};
    std::memcpy(in, s.data(), s.size());
    uint32_t head;
    std::memcpy(&head, in, 4);
    std::memcpy(&b, in + 4, 8);
    a |= static_cast<uint64_t>(head) << 32;
  }
  if ((view_count_ + 1) * 2 > views_.size()) grow();
  const size_t mask = views_.size() - 1;
  size_t at = mix(a, b) & mask;
  while (views_[at].code != kEmpty) {
    if (views_[at].a == a && views_[at].b == b) return views_[at].code;
    at = (at + 1) & mask;
  }
  const uint32_t code = by_content(s, row);
  views_[at] = Slot{a, b, code};
  if (++view_count_ > kViewLimit && view_count_ > 8 * content_.size()) {
    by_views_ = false;  // copies, not shared strings: the view table would only grow
    std::vector<Slot>().swap(views_);
  }
  return code;
}

void StringCoder::add(std::string_view format, const ArrowArray& array, uint32_t* out) {
  code_rows(format, array, nullptr, static_cast<size_t>(array.length), out);
  rows_ += array.length;
}

void StringCoder::add_rows(std::string_view format, const ArrowArray& array, const int64_t* rows,
                           size_t k, uint32_t* out) {
  for (size_t j = 0; j < k; ++j) {
    if (rows[j] < 0 || rows[j] >= array.length) {
      throw std::invalid_argument("string_codes: a row outside its chunk");
    }
  }
  code_rows(format, array, rows, k, out);
  rows_ += array.length;
}

void StringCoder::code_rows(std::string_view format, const ArrowArray& array, const int64_t* rows,
                            size_t k, uint32_t* out) {
  auto row = [&](size_t j) -> int64_t { return rows ? rows[j] : static_cast<int64_t>(j); };
  if (format == "vu") {
    const auto* views = static_cast<const uint8_t*>(array.buffers[1]) + 16 * array.offset;
    for (size_t j = 0; j < k; ++j) {
      const int64_t i = row(j);
      if (!valid(array, i)) {
        out[j] = by_content(std::string_view(), rows_ + i);
      } else if (by_views_) {
        out[j] = by_view(views + 16 * i, array, rows_ + i);
      } else {
        out[j] = by_content(view_string(views + 16 * i, array), rows_ + i);
      }
    }
  } else if (format == "u" || format == "U") {
    const bool wide = format == "U";
    const char* data = static_cast<const char*>(array.buffers[2]);
    auto at = [&](int64_t i) -> int64_t {
      const int64_t x = array.offset + i;
      return wide ? static_cast<const int64_t*>(array.buffers[1])[x]
                  : static_cast<const int32_t*>(array.buffers[1])[x];
    };
    for (size_t j = 0; j < k; ++j) {
      const int64_t i = row(j);
      std::string_view s;
      if (valid(array, i)) {
        const int64_t lo = at(i);
        s = std::string_view(data + lo, static_cast<size_t>(at(i + 1) - lo));
      }
      out[j] = by_content(s, rows_ + i);
    }
  } else {
    throw std::invalid_argument(
        "string_codes: expected a string column (Arrow format vu, u or U), got format " +
        std::string(format));
  }
}

}  // namespace stallscope::arrow
