// Interned strings (region names, kernel names, details). Interning takes a lock and may
// allocate, so it is done once per distinct string, off the recording path; events carry ids.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stallscope {

// Lets find() take a string_view without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class StringTable {
 public:
  static StringTable& instance();

  // Id of s, adding it if new. Id 0 is always "".
  uint32_t intern(std::string_view s);
  // Strings with ids [first, size()), in id order.
  std::vector<std::string> strings_from(uint32_t first);
  uint32_t size();
  // After fork(): the lock may have been held by a thread that does not exist in the child.
  void reinit_after_fork() noexcept;

 private:
  StringTable();
  std::mutex mu_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> ids_;
  std::vector<std::string> strings_;
};

}  // namespace stallscope
