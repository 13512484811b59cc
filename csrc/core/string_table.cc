#include "string_table.h"

#include <new>

namespace stallscope {

StringTable& StringTable::instance() {
  static StringTable* table = new StringTable();  // never destroyed: used from atexit paths
  return *table;
}

StringTable::StringTable() {
  strings_.emplace_back();
  ids_.emplace(std::string(), 0);
}

uint32_t StringTable::intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  ids_.emplace(strings_.back(), id);
  return id;
}

std::vector<std::string> StringTable::strings_from(uint32_t first) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first >= strings_.size()) return {};
  return {strings_.begin() + first, strings_.end()};
}

uint32_t StringTable::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(strings_.size());
}

void StringTable::reinit_after_fork() noexcept { new (&mu_) std::mutex(); }

}  // namespace stallscope
