// The process clock: one monotonic int64 ns time base for every backend of a process.
// CUPTI is pointed at clock_now_ns() through cuptiActivityRegisterTimestampCallback.
#pragma once

#include <cstdint>
#include <ctime>

namespace stallscope {

// ns, CLOCK_MONOTONIC (vDSO, no syscall; about 40 ns on the 2-core CI VM).
inline int64_t clock_now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// ns since the Unix epoch, CLOCK_REALTIME: only for pairing with clock_now_ns() in run.json.
inline int64_t clock_realtime_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Same signature CUPTI expects for its timestamp callback: ns as uint64.
inline uint64_t clock_now_ns_u64() noexcept { return static_cast<uint64_t>(clock_now_ns()); }

}  // namespace stallscope
