// The Kineto reader's string dictionary (csrc/kineto/dict.h): dense codes in first-seen order,
// strings of every length (the hash reads 1-3, 4-7, 8-16 and longer strings differently), ones
// that differ only inside, growth, and adopt().
#include <cstdint>
#include <string>
#include <vector>

#include "check.h"
#include "kineto/dict.h"

using stallscope::kineto::Dict;

TEST(codes_count_up_in_first_seen_order) {
  Dict d;
  CHECK_EQ(d.intern("a"), 0);
  CHECK_EQ(d.intern("b"), 1);
  CHECK_EQ(d.intern("a"), 0);
  CHECK_EQ(d.intern(""), 2);
  CHECK_EQ(d.intern(""), 2);
  REQUIRE(d.strings().size() == 3);
  CHECK_EQ(d.strings()[1], "b");
}

TEST(strings_of_every_length_up_to_forty_are_told_apart) {
  Dict d;
  std::vector<std::string> all;
  for (size_t n = 0; n <= 40; ++n) {
    for (char c : {'x', 'y'}) {
      all.push_back(std::string(n, 'm'));
      if (n > 0) all.back()[n / 2] = c;  // differs from its neighbour only in the middle
    }
  }
  std::vector<int32_t> codes;
  for (const std::string& s : all) codes.push_back(d.intern(s));
  bool same = true;
  for (size_t i = 0; i < all.size(); ++i) {
    same = same && d.intern(all[i]) == codes[i] && d.strings()[codes[i]] == all[i];
  }
  CHECK(same);
}

TEST(names_that_differ_only_inside_get_their_own_codes) {
  Dict d;
  const std::string head = "autograd::engine::evaluate_function: ";
  const std::string tail = "Backward0";
  const int32_t mul = d.intern(head + "Mul" + tail);
  const int32_t add = d.intern(head + "Add" + tail);
  CHECK_NE(mul, add);
  CHECK_EQ(d.intern(head + "Mul" + tail), mul);
}

TEST(growth_keeps_every_code) {
  Dict d;
  for (int i = 0; i < 100000; ++i) d.intern("kernel_" + std::to_string(i));
  bool kept = true;
  for (int i = 0; i < 100000; i += 7) kept = kept && d.intern("kernel_" + std::to_string(i)) == i;
  CHECK(kept);
  CHECK_EQ(d.strings().size(), 100000u);
}

TEST(adopt_maps_the_other_dictionary_into_this_one) {
  Dict a, b;
  a.intern("x");
  a.intern("y");
  b.intern("y");
  b.intern("z");
  const std::vector<int32_t> map = a.adopt(b);
  CHECK(map == (std::vector<int32_t>{1, 2}));
  CHECK_EQ(a.strings().size(), 3u);
  CHECK_EQ(a.strings()[2], "z");
}
