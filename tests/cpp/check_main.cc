// The runner of the C++ unit tests (check.h): every registered case in order, or those whose
// name contains one of the arguments; --list prints the names. Exit status 1 when a check
// failed, a case threw, or no case ran (a filter that matches nothing is an error, not a pass).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "check.h"

namespace check {

namespace {
int g_failures = 0;  // failed checks of the running case
}

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

void fail(const char* file, int line, const std::string& what) {
  ++g_failures;
  std::printf("%s:%d: failed: %s\n", file, line, what.c_str());
}

}  // namespace check

int main(int argc, char** argv) {
  std::vector<std::string> filters;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0) {
      for (const check::Case& c : check::registry()) std::printf("%s\n", c.name);
      return 0;
    }
    filters.emplace_back(argv[i]);
  }
  int ran = 0, failed = 0;
  for (const check::Case& c : check::registry()) {
    bool wanted = filters.empty();
    for (const std::string& f : filters)
      wanted = wanted || std::string(c.name).find(f) != std::string::npos;
    if (!wanted) continue;
    ++ran;
    check::g_failures = 0;
    std::printf("[ RUN  ] %s\n", c.name);
    std::fflush(stdout);
    try {
      c.fn();
    } catch (const check::Abort&) {
      // the REQUIRE that ended the case recorded its failure
    } catch (const std::exception& e) {
      check::fail(__FILE__, __LINE__, std::string("uncaught exception: ") + e.what());
    } catch (...) {
      check::fail(__FILE__, __LINE__, "uncaught exception of an unknown type");
    }
    std::printf("[ %s ] %s\n", check::g_failures == 0 ? " OK " : "FAIL", c.name);
    std::fflush(stdout);
    failed += check::g_failures != 0;
  }
  if (ran == 0) {
    std::fprintf(stderr, "no test case matched\n");
    return 1;
  }
  std::printf("%d of %d cases passed\n", ran - failed, ran);
  return failed == 0 ? 0 : 1;
}
