// Names of CUPTI activities (see activity_names.cc). Not thread-safe: the backend calls these
// under its parse lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stallscope::cupti {

uint32_t intern(std::string_view s);
// Demangled (abi::__cxa_demangle) and interned once per distinct mangled name.
uint32_t kernel_name_id(const char* mangled);
size_t distinct_kernel_names();
// Interned once per distinct string.
uint32_t fixed_id(const std::string& s);
const char* memory_kind_name(uint8_t k);
const char* copy_kind_name(uint8_t k);
// "Memcpy HtoD (Pinned -> Device)"
uint32_t memcpy_name_id(uint8_t copy, uint8_t src, uint8_t dst);
const char* sync_name(int32_t t);
const char* overhead_name(int32_t k);
const char* kind_name(int32_t k);

// The runtime and driver API calls recorded ("RUNTIME trimmed to launch, copy and sync").
struct ApiCall {
  uint32_t cbid;
  const char* name;
};
std::span<const ApiCall> runtime_calls();
std::span<const ApiCall> driver_calls();
uint32_t api_name_id(bool driver, uint32_t cbid);

}  // namespace stallscope::cupti
