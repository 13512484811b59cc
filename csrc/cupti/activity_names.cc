// Names of CUPTI activities as stallscope stores them: demangled kernel names, Kineto-style copy,
// memset and sync names (so the shared classifier sees the names it knows), API call names.
#include "activity_names.h"

#include <cxxabi.h>

#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/string_table.h"
#include "cupti_abi.h"

namespace stallscope::cupti {

uint32_t intern(std::string_view s) { return StringTable::instance().intern(s); }

// Kernel names: demangled once per distinct mangled name (abi::__cxa_demangle), then cached.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> g_kernel_names;

uint32_t kernel_name_id(const char* mangled) {
  if (mangled == nullptr) mangled = "";
  const std::string_view key(mangled);
  auto it = g_kernel_names.find(key);
  if (it != g_kernel_names.end()) return it->second;
  uint32_t id;
  int status = -1;
  char* d = (key.size() > 2 && key[0] == '_' && key[1] == 'Z')
                ? abi::__cxa_demangle(mangled, nullptr, nullptr, &status)
                : nullptr;
  if (d != nullptr && status == 0) {
    id = intern(d);
  } else {
    id = intern(key);  // C names (extern "C" kernels) and anything that does not demangle
  }
  std::free(d);
  g_kernel_names.emplace(std::string(key), id);
  return id;
}

// Cached ids of short fixed names.
std::unordered_map<std::string, uint32_t> g_fixed_names;
uint32_t fixed_id(const std::string& s) {
  auto it = g_fixed_names.find(s);
  if (it != g_fixed_names.end()) return it->second;
  const uint32_t id = intern(s);
  g_fixed_names.emplace(s, id);
  return id;
}

const char* memory_kind_name(uint8_t k) {
  switch (k) {
    case 1:
      return "Pageable";
    case 2:
      return "Pinned";
    case 3:
      return "Device";
    case 4:
      return "Array";
    case 5:
      return "Managed";
    case 6:
      return "Device Static";
    case 7:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

const char* copy_kind_name(uint8_t k) {
  switch (k) {
    case 1:
      return "HtoD";
    case 2:
      return "DtoH";
    case 3:
      return "HtoA";
    case 4:
      return "AtoH";
    case 5:
      return "AtoA";
    case 6:
      return "AtoD";
    case 7:
      return "DtoA";
    case 8:
      return "DtoD";
    case 9:
      return "HtoH";
    case 10:
      return "PtoP";
    default:
      return "Unknown";
  }
}

// "Memcpy HtoD (Pinned -> Device)": the names Kineto uses, so the shared classifier sees them.
uint32_t memcpy_name_id(uint8_t copy, uint8_t src, uint8_t dst) {
  // Copies can be frequent: ids cached by (copy kind, source, destination), each below 16.
  static uint32_t cache[16][16][16] = {};
  const bool small = copy < 16 && src < 16 && dst < 16;
  if (small && cache[copy][src][dst] != 0) return cache[copy][src][dst];
  std::string s = "Memcpy ";
  s += copy_kind_name(copy);
  s += " (";
  s += memory_kind_name(src);
  s += " -> ";
  s += memory_kind_name(dst);
  s += ")";
  const uint32_t id = fixed_id(s);
  if (small) cache[copy][src][dst] = id;
  return id;
}

const char* sync_name(int32_t t) {
  switch (t) {
    case kSyncEvent:
      return "Event Sync";
    case kSyncStreamWaitEvent:
      return "Stream Wait Event";
    case kSyncStream:
      return "Stream Sync";
    case kSyncContext:
      return "Context Sync";
    default:
      return "Unknown Sync";
  }
}

const char* overhead_name(int32_t k) {
  switch (k) {
    case 1:
      return "Driver compiler";
    case 1 << 16:
      return "CUPTI buffer flush";
    case 2 << 16:
      return "CUPTI instrumentation";
    case 3 << 16:
      return "CUPTI resource";
    case 4 << 16:
      return "Runtime-triggered module loading";
    case 5 << 16:
      return "Lazy function loading";
    case 6 << 16:
      return "Command buffer full";
    case 7 << 16:
      return "Activity buffer request";
    case 8 << 16:
      return "UVM activity init";
    default:
      return "Unknown overhead";
  }
}

// The runtime and driver calls kept ("RUNTIME trimmed to launch, copy and sync calls").
constexpr ApiCall kRuntimeCalls[] = {
    {13, "cudaLaunch"},
    {211, "cudaLaunchKernel"},
    {214, "cudaLaunchKernel_ptsz"},
    {269, "cudaLaunchCooperativeKernel"},
    {270, "cudaLaunchCooperativeKernel_ptsz"},
    {430, "cudaLaunchKernelExC"},
    {431, "cudaLaunchKernelExC_ptsz"},
    {311, "cudaGraphLaunch"},
    {312, "cudaGraphLaunch_ptsz"},
    {31, "cudaMemcpy"},
    {32, "cudaMemcpy2D"},
    {41, "cudaMemcpyAsync"},
    {44, "cudaMemcpy2DAsync"},
    {144, "cudaMemcpy3D"},
    {145, "cudaMemcpy3DAsync"},
    {160, "cudaMemcpyPeer"},
    {161, "cudaMemcpyPeerAsync"},
    {215, "cudaMemcpy_ptds"},
    {225, "cudaMemcpyAsync_ptsz"},
    {482, "cudaMemcpyBatchAsync"},
    {509, "cudaMemcpyBatchAsync"},
    {49, "cudaMemset"},
    {51, "cudaMemsetAsync"},
    {233, "cudaMemset_ptds"},
    {235, "cudaMemsetAsync_ptsz"},
    {126, "cudaThreadSynchronize"},
    {131, "cudaStreamSynchronize"},
    {239, "cudaStreamSynchronize_ptsz"},
    {137, "cudaEventSynchronize"},
    {147, "cudaStreamWaitEvent"},
    {247, "cudaStreamWaitEvent_ptsz"},
    {165, "cudaDeviceSynchronize"},
};
// Driver launches: NCCL and Triton launch through the driver API, not the runtime.
constexpr ApiCall kDriverCalls[] = {
    {307, "cuLaunchKernel"},
    {442, "cuLaunchKernel_ptsz"},
    {477, "cuLaunchCooperativeKernel"},
    {478, "cuLaunchCooperativeKernel_ptsz"},
    {514, "cuGraphLaunch"},
    {515, "cuGraphLaunch_ptsz"},
    {652, "cuLaunchKernelEx"},
    {653, "cuLaunchKernelEx_ptsz"},
};

uint32_t api_name_id(bool driver, uint32_t cbid) {
  const ApiCall* b = driver ? std::begin(kDriverCalls) : std::begin(kRuntimeCalls);
  const ApiCall* e = driver ? std::end(kDriverCalls) : std::end(kRuntimeCalls);
  for (const ApiCall* c = b; c != e; ++c) {
    if (c->cbid == cbid) return fixed_id(c->name);
  }
  return fixed_id(std::string(driver ? "driver_cbid_" : "runtime_cbid_") + std::to_string(cbid));
}

std::span<const ApiCall> runtime_calls() { return kRuntimeCalls; }
std::span<const ApiCall> driver_calls() { return kDriverCalls; }
size_t distinct_kernel_names() { return g_kernel_names.size(); }

const char* kind_name(int32_t k) {
  switch (k) {
    case kActConcurrentKernel:
      return "CONCURRENT_KERNEL";
    case kActMemcpy:
      return "MEMCPY";
    case kActMemcpy2:
      return "MEMCPY2";
    case kActMemset:
      return "MEMSET";
    case kActSynchronization:
      return "SYNCHRONIZATION";
    case kActExternalCorrelation:
      return "EXTERNAL_CORRELATION";
    case kActRuntime:
      return "RUNTIME";
    case kActDriver:
      return "DRIVER";
    case kActMarker:
      return "MARKER";
    case kActOverhead:
      return "OVERHEAD";
    default:
      return "?";
  }
}

}  // namespace stallscope::cupti
