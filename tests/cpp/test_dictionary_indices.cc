// A dictionary column's indices read from the Arrow C data interface
// (csrc/arrow/dictionary_indices.h): every index type, nulls, offsets, and the chunks refused.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "arrow/dictionary_indices.h"
#include "check.h"

namespace {

using stallscope::arrow::dictionary_indices;

// A chunk of `indices` (of type I) over a dictionary of `categories` values; `valid`: one flag
// per row (empty: no nulls); `offset`: rows of the buffers before the chunk's first.
template <typename I>
struct Chunk {
  std::vector<I> indices;
  std::vector<uint8_t> bitmap;
  ArrowArray dict{};
  ArrowArray a{};
  const void* buffers[2] = {nullptr, nullptr};

  Chunk(std::vector<I> idx, int64_t categories, const std::vector<bool>& valid = {},
        int64_t offset = 0)
      : indices(std::move(idx)) {
    dict.length = categories;
    a.length = static_cast<int64_t>(indices.size()) - offset;
    a.offset = offset;
    a.n_buffers = 2;
    if (!valid.empty()) {
      bitmap.assign((valid.size() + 7) / 8, 0);
      for (size_t i = 0; i < valid.size(); ++i) {
        if (valid[i]) bitmap[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
        if (!valid[i] && static_cast<int64_t>(i) >= offset) ++a.null_count;
      }
      buffers[0] = bitmap.data();
    }
    buffers[1] = indices.data();
    a.buffers = buffers;
    a.dictionary = &dict;
  }
};

}  // namespace

TEST(indices_of_every_integer_type) {
  auto run = [](char format, auto chunk) {
    std::vector<uint8_t> out(chunk.indices.size());
    dictionary_indices(format, chunk.a, 255, 3, out.data());
    return out;
  };
  const std::vector<uint8_t> want = {2, 0, 1};
  CHECK(run('c', Chunk<int8_t>({2, 0, 1}, 3)) == want);
  CHECK(run('C', Chunk<uint8_t>({2, 0, 1}, 3)) == want);
  CHECK(run('s', Chunk<int16_t>({2, 0, 1}, 3)) == want);
  CHECK(run('S', Chunk<uint16_t>({2, 0, 1}, 3)) == want);
  CHECK(run('i', Chunk<int32_t>({2, 0, 1}, 3)) == want);
  CHECK(run('I', Chunk<uint32_t>({2, 0, 1}, 3)) == want);
  CHECK(run('l', Chunk<int64_t>({2, 0, 1}, 3)) == want);
  CHECK(run('L', Chunk<uint64_t>({2, 0, 1}, 3)) == want);
}

TEST(nulls_become_the_null_code_and_the_offset_is_applied) {
  // Rows 0-1 lie before the chunk (offset 2); row 3 is null.
  Chunk<int32_t> c({9, 9, 1, 7, 0, 1}, 2, {true, true, true, false, true, true}, 2);
  std::vector<uint32_t> out(4, 12345);
  dictionary_indices('i', c.a, 300, 2, out.data());
  CHECK(out == (std::vector<uint32_t>{1, 300, 0, 1}));
}

TEST(an_index_past_the_dictionary_is_refused) {
  std::vector<uint8_t> out(3);
  Chunk<int8_t> high({0, 3, 1}, 3);
  CHECK_THROWS(dictionary_indices('c', high.a, 255, 3, out.data()), std::runtime_error);
  Chunk<int8_t> negative({0, -1, 1}, 3);
  CHECK_THROWS(dictionary_indices('c', negative.a, 255, 3, out.data()), std::runtime_error);
  Chunk<uint64_t> huge({0, ~uint64_t{0}}, 3);  // past int64: negative, refused
  CHECK_THROWS(dictionary_indices('L', huge.a, 255, 3, out.data()), std::runtime_error);
  // A null row's index is not read as an index.
  Chunk<int8_t> null_high({0, 99}, 3, {true, false});
  dictionary_indices('c', null_high.a, 255, 3, out.data());
  CHECK_EQ(out[0], 0);
  CHECK_EQ(out[1], 255);
}

TEST(chunks_without_indices_or_with_another_dictionary_are_refused) {
  std::vector<uint8_t> out(3);
  Chunk<int8_t> c({0, 1, 2}, 3);
  CHECK_THROWS(dictionary_indices('c', c.a, 255, 4, out.data()), std::runtime_error);
  c.a.dictionary = nullptr;
  CHECK_THROWS(dictionary_indices('c', c.a, 255, 3, out.data()), std::runtime_error);
  Chunk<int8_t> d({0, 1, 2}, 3);
  d.a.n_buffers = 1;
  CHECK_THROWS(dictionary_indices('c', d.a, 255, 3, out.data()), std::runtime_error);
  Chunk<int8_t> e({0, 1, 2}, 3);
  e.buffers[1] = nullptr;
  CHECK_THROWS(dictionary_indices('c', e.a, 255, 3, out.data()), std::runtime_error);
  Chunk<int8_t> f({0, 1, 2}, 3);
  CHECK_THROWS(dictionary_indices('f', f.a, 255, 3, out.data()), std::runtime_error);
}
