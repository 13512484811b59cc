// The string table (csrc/core/string_table.h): interning, stable ids, and interning from many
// threads at once (it takes a lock: every thread sees one id per string).
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "core/string_table.h"

using stallscope::StringTable;

TEST(empty_string_is_id_zero) {
  StringTable& t = StringTable::instance();
  CHECK_EQ(t.intern(""), 0u);
  REQUIRE(t.size() >= 1);
  CHECK_EQ(t.strings_from(0).front(), "");
}

TEST(same_string_same_id_and_new_strings_count_up) {
  StringTable& t = StringTable::instance();
  const uint32_t before = t.size();
  const uint32_t a = t.intern("forward");
  const uint32_t b = t.intern("backward");
  CHECK_EQ(a, before);
  CHECK_EQ(b, before + 1);
  CHECK_EQ(t.intern("forward"), a);
  CHECK_EQ(t.intern(std::string("backward")), b);
  CHECK_EQ(t.size(), before + 2);
}

TEST(ids_stay_put_as_the_table_grows) {
  StringTable& t = StringTable::instance();
  const uint32_t first = t.intern("kernel:gemm");
  std::vector<uint32_t> ids;
  for (int i = 0; i < 20000; ++i) ids.push_back(t.intern("name " + std::to_string(i)));
  CHECK_EQ(t.intern("kernel:gemm"), first);
  bool stable = true;
  for (int i = 0; i < 20000; ++i)
    stable = stable && t.intern("name " + std::to_string(i)) == ids[i];
  CHECK(stable);
  const std::vector<std::string> tail = t.strings_from(ids.front());
  REQUIRE(tail.size() >= 20000);
  CHECK_EQ(tail[0], "name 0");
  CHECK_EQ(tail[19999], "name 19999");
}

TEST(strings_with_zero_bytes_and_views_are_distinct) {
  StringTable& t = StringTable::instance();
  const std::string with_nul("a\0b", 3);
  const uint32_t x = t.intern(with_nul);
  const uint32_t y = t.intern("a");
  CHECK_NE(x, y);
  CHECK_EQ(t.intern(std::string_view(with_nul)), x);
  CHECK_EQ(t.strings_from(x).front(), with_nul);
  const std::string longer = "prefix-suffix";
  CHECK_EQ(t.intern(std::string_view(longer).substr(0, 6)), t.intern("prefix"));
}

TEST(strings_from_past_the_end_is_empty) {
  StringTable& t = StringTable::instance();
  CHECK(t.strings_from(t.size()).empty());
  CHECK(t.strings_from(t.size() + 100).empty());
}

// Threads intern overlapping sets of names at once: one id per name, the same in every thread,
// and strings_from gives each name back at its id.
TEST(concurrent_interning_agrees_on_ids) {
  StringTable& t = StringTable::instance();
  constexpr int kThreads = 4, kNames = 3000;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::vector<std::thread> pool;
  for (int w = 0; w < kThreads; ++w) {
    pool.emplace_back([&, w] {
      // Each thread walks the names from its own starting point.
      for (int k = 0; k < kNames; ++k) {
        const int i = (k + w * 777) % kNames;
        ids[w][i] = t.intern("shared " + std::to_string(i));
      }
    });
  }
  for (auto& th : pool) th.join();
  bool agree = true;
  for (int w = 1; w < kThreads; ++w) agree = agree && ids[w] == ids[0];
  CHECK(agree);
  const std::vector<std::string> all = t.strings_from(0);
  bool right = true;
  for (int i = 0; i < kNames; ++i) {
    right = right && ids[0][i] < all.size() && all[ids[0][i]] == "shared " + std::to_string(i);
  }
  CHECK(right);
  CHECK_EQ(t.size(), all.size());
}
