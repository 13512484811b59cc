// The C++ unit tests' framework: TEST(name) { ... } registers a case; CHECK(cond) and
// CHECK_EQ / NE / LT / LE / GT / GE(a, b) record a failure (file, line, the expression and the
// values) and let the case go on; REQUIRE(cond) ends the case on failure; CHECK_THROWS(expr,
// Type) checks that expr throws a Type. main() (check_main.cc) runs every case, or those whose
// name contains an argument, and exits non-zero when a check failed, a case threw, or no case
// ran.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace check {

struct Case {
  const char* name;
  void (*fn)();
};

// Every case, in registration order (one translation unit: the file's order).
std::vector<Case>& registry();

struct Register {
  Register(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

// Records one failed check of the running case.
void fail(const char* file, int line, const std::string& what);

// Thrown by REQUIRE to end the case (after its failure is recorded).
struct Abort {};

// A value as text for a failure message: integers (chars and bytes as numbers), strings
// quoted, anything else that streams, else "(value)".
template <typename T>
std::string show(const T& v) {
  std::ostringstream o;
  if constexpr (std::is_same_v<T, bool>) {
    o << (v ? "true" : "false");
  } else if constexpr (std::is_integral_v<T> && sizeof(T) == 1) {
    o << static_cast<int>(v);
  } else if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T> || std::is_enum_v<T>) {
    if constexpr (std::is_enum_v<T>) {
      o << static_cast<long long>(v);
    } else {
      o.precision(17);
      o << v;
    }
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    o << '"' << std::string_view(v) << '"';
  } else if constexpr (requires(std::ostream& s, const T& x) { s << x; }) {
    o << v;
  } else {
    o << "(value)";
  }
  return o.str();
}

// The comparisons of CHECK_EQ and the like: integers of different signedness compare by value
// (chars and other small integers as int; bools as they are).
template <typename T>
constexpr bool kWhole = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
auto widen(const T& v) {
  if constexpr (sizeof(T) <= 2) {
    return static_cast<int>(v);
  } else {
    return v;
  }
}
template <typename A, typename B>
bool equal(const A& a, const B& b) {
  if constexpr (kWhole<A> && kWhole<B>) {
    return std::cmp_equal(widen(a), widen(b));
  } else {
    return a == b;
  }
}
template <typename A, typename B>
bool less(const A& a, const B& b) {
  if constexpr (kWhole<A> && kWhole<B>) {
    return std::cmp_less(widen(a), widen(b));
  } else {
    return a < b;
  }
}

template <typename A, typename B>
bool compare(const char* file, int line, const char* expr, bool ok, const A& a, const B& b) {
  if (!ok) fail(file, line, std::string(expr) + " with " + show(a) + " and " + show(b));
  return ok;
}

}  // namespace check

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)

#define TEST(name)                                                                           \
  static void CHECK_CAT(test_, name)();                                                      \
  static const ::check::Register CHECK_CAT(register_, name)(#name, &CHECK_CAT(test_, name)); \
  static void CHECK_CAT(test_, name)()

#define CHECK(cond) ((cond) ? true : (::check::fail(__FILE__, __LINE__, "CHECK(" #cond ")"), false))

#define REQUIRE(cond)                                          \
  do {                                                         \
    if (!(cond)) {                                             \
      ::check::fail(__FILE__, __LINE__, "REQUIRE(" #cond ")"); \
      throw ::check::Abort{};                                  \
    }                                                          \
  } while (0)

#define CHECK_OP(a, b, ok, op)                                                              \
  [&](const auto& check_a, const auto& check_b) {                                           \
    return ::check::compare(__FILE__, __LINE__, "CHECK(" #a " " op " " #b ")", ok, check_a, \
                            check_b);                                                       \
  }(a, b)

#define CHECK_EQ(a, b) CHECK_OP(a, b, ::check::equal(check_a, check_b), "==")
#define CHECK_NE(a, b) CHECK_OP(a, b, !::check::equal(check_a, check_b), "!=")
#define CHECK_LT(a, b) CHECK_OP(a, b, ::check::less(check_a, check_b), "<")
#define CHECK_LE(a, b) CHECK_OP(a, b, !::check::less(check_b, check_a), "<=")
#define CHECK_GT(a, b) CHECK_OP(a, b, ::check::less(check_b, check_a), ">")
#define CHECK_GE(a, b) CHECK_OP(a, b, !::check::less(check_a, check_b), ">=")

#define CHECK_THROWS(expr, Type)                                                              \
  [&] {                                                                                       \
    try {                                                                                     \
      (void)(expr);                                                                           \
    } catch (const Type&) {                                                                   \
      return true;                                                                            \
    } catch (...) {                                                                           \
      ::check::fail(__FILE__, __LINE__, "CHECK_THROWS(" #expr ", " #Type "): threw another"); \
      return false;                                                                           \
    }                                                                                         \
    ::check::fail(__FILE__, __LINE__, "CHECK_THROWS(" #expr ", " #Type "): did not throw");   \
    return false;                                                                             \
  }()
