#include "cupti_loader.h"

#include <dlfcn.h>

#include <mutex>

namespace stallscope::cupti {

namespace {

std::mutex g_load_mu;
void* g_handle = nullptr;
Api g_api{};
LoadResult g_loaded;

template <typename F>
bool resolve(void* h, const char* sym, F* out, bool required, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(h, sym));
  if (*out == nullptr && required) {
    if (!missing->empty()) *missing += ", ";
    *missing += sym;
    return false;
  }
  return true;
}

bool resolve_all(void* h, Api* a, std::string* missing) {
  bool ok = true;
  ok &= resolve(h, "cuptiGetVersion", &a->GetVersion, true, missing);
  ok &= resolve(h, "cuptiGetTimestamp", &a->GetTimestamp, true, missing);
  ok &= resolve(h, "cuptiActivityEnable", &a->ActivityEnable, true, missing);
  ok &= resolve(h, "cuptiActivityDisable", &a->ActivityDisable, true, missing);
  ok &= resolve(h, "cuptiActivityEnableRuntimeApi", &a->ActivityEnableRuntimeApi, true, missing);
  ok &= resolve(h, "cuptiActivityEnableDriverApi", &a->ActivityEnableDriverApi, false, missing);
  ok &= resolve(h, "cuptiActivityRegisterCallbacks", &a->ActivityRegisterCallbacks, true, missing);
  ok &= resolve(h, "cuptiActivityRegisterTimestampCallback", &a->ActivityRegisterTimestampCallback,
                true, missing);
  ok &= resolve(h, "cuptiActivityGetNextRecord", &a->ActivityGetNextRecord, true, missing);
  ok &= resolve(h, "cuptiActivityGetNumDroppedRecords", &a->ActivityGetNumDroppedRecords, true,
                missing);
  ok &= resolve(h, "cuptiActivityFlushAll", &a->ActivityFlushAll, true, missing);
  ok &= resolve(h, "cuptiActivityFlushPeriod", &a->ActivityFlushPeriod, false, missing);
  ok &= resolve(h, "cuptiActivitySetAttribute", &a->ActivitySetAttribute, false, missing);
  ok &= resolve(h, "cuptiActivityPushExternalCorrelationId", &a->ActivityPushExternalCorrelationId,
                true, missing);
  ok &= resolve(h, "cuptiActivityPopExternalCorrelationId", &a->ActivityPopExternalCorrelationId,
                true, missing);
  ok &= resolve(h, "cuptiSubscribe", &a->Subscribe, false, missing);
  ok &= resolve(h, "cuptiUnsubscribe", &a->Unsubscribe, false, missing);
  ok &= resolve(h, "cuptiFinalize", &a->Finalize, true, missing);
  return ok;
}

}  // namespace

LoadResult load(const std::vector<std::string>& candidates) {
  std::lock_guard<std::mutex> lk(g_load_mu);
  if (g_handle != nullptr) return g_loaded;
  LoadResult r;
  for (const std::string& path : candidates) {
    dlerror();
    // RTLD_LOCAL: CUPTI's symbols stay out of the global namespace (another tool may load its own).
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      r.tried.push_back(path + ": " + (e != nullptr ? e : "dlopen failed"));
      continue;
    }
    Api a{};
    std::string missing;
    if (!resolve_all(h, &a, &missing)) {
      r.tried.push_back(path + ": not a usable libcupti (missing " + missing + ")");
      dlclose(h);
      continue;
    }
    uint32_t version = 0;
    if (a.GetVersion(&version) != kSuccess) version = 0;
    g_handle = h;
    g_api = a;
    r.ok = true;
    r.path = path;
    r.version = version;
    g_loaded = r;
    return r;
  }
  return r;
}

bool loaded() noexcept { return g_handle != nullptr; }

const Api& api() noexcept { return g_api; }

bool driver_loadable(std::string* why) {
  dlerror();
  // RTLD_NOLOAD first: no side effect when the application (torch) already loaded it.
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    if (why != nullptr) *why = e != nullptr ? e : "libcuda.so.1: dlopen failed";
    return false;
  }
  // Kept loaded: unloading the driver library under a running CUDA application is unsafe.
  return true;
}

const char* result_name(CUptiResult r) noexcept {
  switch (r) {
    case 0:
      return "CUPTI_SUCCESS";
    case 1:
      return "CUPTI_ERROR_INVALID_PARAMETER";
    case 2:
      return "CUPTI_ERROR_INVALID_DEVICE";
    case 3:
      return "CUPTI_ERROR_INVALID_CONTEXT";
    case 7:
      return "CUPTI_ERROR_INVALID_OPERATION";
    case 8:
      return "CUPTI_ERROR_OUT_OF_MEMORY";
    case 9:
      return "CUPTI_ERROR_HARDWARE";
    case 11:
      return "CUPTI_ERROR_API_NOT_IMPLEMENTED";
    case 12:
      return "CUPTI_ERROR_MAX_LIMIT_REACHED";
    case 13:
      return "CUPTI_ERROR_NOT_READY";
    case 14:
      return "CUPTI_ERROR_NOT_COMPATIBLE";
    case 15:
      return "CUPTI_ERROR_NOT_INITIALIZED";
    case 18:
      return "CUPTI_ERROR_QUEUE_EMPTY";
    case 19:
      return "CUPTI_ERROR_INVALID_HANDLE";
    case 20:
      return "CUPTI_ERROR_INVALID_STREAM";
    case 21:
      return "CUPTI_ERROR_INVALID_KIND";
    case 23:
      return "CUPTI_ERROR_DISABLED";
    case 26:
      return "CUPTI_ERROR_HARDWARE_BUSY";
    case 27:
      return "CUPTI_ERROR_NOT_SUPPORTED";
    case 33:
      return "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED";
    case 34:
      return "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE";
    case 35:
      return "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
    case 36:
      return "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED";
    case 38:
      return "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED";
    case 39:
      return "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    case 40:
      return "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES";
    case 41:
      return "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED";
    case 42:
      return "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED";
    case 43:
      return "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED";
    case 44:
      return "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED";
    case 45:
      return "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED";
    case 999:
      return "CUPTI_ERROR_UNKNOWN";
    default:
      return "CUPTI_ERROR_(unlisted)";
  }
}

}  // namespace stallscope::cupti
