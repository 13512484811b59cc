#include "core_api.h"

#include <cstring>

#include "clock.h"
#include "recorder.h"
#include "string_table.h"

static_assert(sizeof(stallscope_event) == sizeof(stallscope::EventRecord), "ABI mismatch");

namespace {

int64_t api_now_ns() { return stallscope::clock_now_ns(); }

uint32_t api_intern(const char* s, size_t len) {
  if (s == nullptr) return 0;
  try {
    return stallscope::StringTable::instance().intern(std::string_view(s, len));
  } catch (...) {
    return 0;  // out of memory: the event keeps an empty name rather than failing the caller
  }
}

int api_record(const stallscope_event* e) {
  stallscope::EventRecord r;
  std::memcpy(&r, e, sizeof r);
  return stallscope::record(r) ? 1 : 0;
}

int api_recording() { return stallscope::recording() ? 1 : 0; }

int32_t api_current_lane() { return stallscope::current_lane(); }

const stallscope_core_api_t kApi = {
    STALLSCOPE_CORE_API_VERSION,
    sizeof(stallscope_core_api_t),
    &api_now_ns,
    &api_intern,
    &api_record,
    &api_recording,
    &api_current_lane,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const stallscope_core_api_t*
stallscope_core_api() {
  return &kApi;
}
