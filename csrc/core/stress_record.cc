#include "core/stress_record.h"

#include <cstddef>
#include <latch>
#include <thread>

#include "core/clock.h"
#include "core/recorder.h"

namespace stallscope {

StressResult stress_record(int threads, uint64_t n, uint32_t name_id, bool read_clock) {
  const auto count = static_cast<size_t>(threads > 0 ? threads : 0);
  StressResult out{std::vector<int64_t>(count, 0), std::vector<uint64_t>(count, 0)};
  if (count == 0) return out;
  std::vector<std::thread> pool;
  pool.reserve(count);
  std::latch started(static_cast<std::ptrdiff_t>(count)),
      finished(static_cast<std::ptrdiff_t>(count));
  for (size_t t = 0; t < count; ++t) {
    pool.emplace_back([&, t] {
      EventRecord r{};
      r.name_id = name_id;
      r.lane = static_cast<int32_t>(t);
      r.device = -1;
      r.kind = static_cast<uint8_t>(Kind::kRegion);
      uint64_t ok = 0;
      started.arrive_and_wait();
      const int64_t t0 = clock_now_ns();
      for (uint64_t i = 0; i < n; ++i) {
        r.correlation = static_cast<int64_t>(i);
        if (read_clock) {
          r.start_ns = clock_now_ns();
          r.end_ns = r.start_ns;
        } else {
          r.start_ns = static_cast<int64_t>(i);
          r.end_ns = static_cast<int64_t>(i) + 1;
        }
        ok += record(r) ? 1 : 0;
      }
      out.elapsed_ns[t] = clock_now_ns() - t0;
      out.accepted[t] = ok;
      finished.arrive_and_wait();
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace stallscope
