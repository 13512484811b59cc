// Loads libcupti with dlopen at run time (no link-time CUDA dependency) and resolves the entry
// points stallscope uses. The candidate paths come from the Python side (_cupti.candidates():
// STALLSCOPE_CUPTI_LIBRARY, CUDA_HOME / CUDA_PATH, /usr/local/cuda, the nvidia-cuda-cupti wheels).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cupti_abi.h"

namespace stallscope::cupti {

struct LoadResult {
  bool ok = false;
  std::string path;                // the library in use
  uint32_t version = 0;            // cuptiGetVersion (CUPTI_API_VERSION), 0 if unknown
  std::vector<std::string> tried;  // "path: why not" for each candidate that failed
};

// Tries the candidates in order; the first that dlopens and has every required symbol stays
// loaded for the life of the process (a later call returns it without trying others).
LoadResult load(const std::vector<std::string>& candidates);
bool loaded() noexcept;
// The resolved entry points; valid only when loaded().
const Api& api() noexcept;

// The NVIDIA driver: can libcuda.so.1 be loaded. Fills why when not.
bool driver_loadable(std::string* why);

}  // namespace stallscope::cupti
