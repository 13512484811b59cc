// The collector (csrc/core/collector.h): draining every thread's ring into columns, a bounded
// drain, discard, and draining while threads record (nothing lost or duplicated).
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "check.h"
#include "core/collector.h"
#include "core/recorder.h"
#include "core/thread_registry.h"

namespace {

using stallscope::Collector;
using stallscope::ColumnChunk;
using stallscope::EventRecord;
using stallscope::g_registry;

void fresh(uint32_t threads, uint64_t capacity) {
  g_registry.set_enabled(false);
  Collector::discard();
  // Through another size first: always a new pool, no claim or count of an earlier case.
  REQUIRE(g_registry.configure(threads + 1, capacity));
  REQUIRE(g_registry.configure(threads, capacity));
  g_registry.reset_stats();
  g_registry.set_enabled(true);
}

EventRecord event(int64_t i, int32_t lane) {
  EventRecord e{};
  e.start_ns = 1000 + i;
  e.end_ns = 2000 + i;
  e.correlation = i;
  e.bytes = -i;
  e.name_id = static_cast<uint32_t>(i + 1);
  e.detail_id = static_cast<uint32_t>(i + 2);
  e.lane = lane;
  e.device = static_cast<int16_t>(i % 8);
  e.kind = static_cast<uint8_t>(i % 16);
  e.category = static_cast<uint8_t>(i % 9);
  return e;
}

}  // namespace

TEST(drain_moves_every_field_into_its_column) {
  fresh(2, 64);
  for (int64_t i = 0; i < 10; ++i) REQUIRE(stallscope::record(event(i, 5)));
  CHECK_EQ(Collector::buffered(), 10u);
  ColumnChunk c = Collector::drain(~0ULL);
  REQUIRE(c.size() == 10);
  for (size_t k = 0; k < 10; ++k) {
    const EventRecord e = event(static_cast<int64_t>(k), 5);
    CHECK_EQ(c.start_ns[k], e.start_ns);
    CHECK_EQ(c.end_ns[k], e.end_ns);
    CHECK_EQ(c.correlation[k], e.correlation);
    CHECK_EQ(c.bytes[k], e.bytes);
    CHECK_EQ(c.name_id[k], e.name_id);
    CHECK_EQ(c.detail_id[k], e.detail_id);
    CHECK_EQ(c.lane[k], e.lane);
    CHECK_EQ(c.device[k], e.device);
    CHECK_EQ(c.kind[k], e.kind);
    CHECK_EQ(c.category[k], e.category);
  }
  CHECK_EQ(Collector::buffered(), 0u);
  CHECK_EQ(Collector::drain(~0ULL).size(), 0u);
}

TEST(a_bounded_drain_takes_the_oldest_and_leaves_the_rest) {
  fresh(2, 64);
  for (int64_t i = 0; i < 10; ++i) stallscope::record(event(i, 0));
  ColumnChunk a = Collector::drain(4);
  REQUIRE(a.size() == 4);
  CHECK_EQ(a.correlation[0], 0);
  CHECK_EQ(a.correlation[3], 3);
  CHECK_EQ(Collector::buffered(), 6u);
  ColumnChunk b = Collector::drain(~0ULL);
  REQUIRE(b.size() == 6);
  CHECK_EQ(b.correlation[0], 4);
  CHECK_EQ(b.correlation[5], 9);
}

TEST(a_bounded_drain_spans_the_rings_of_several_threads) {
  fresh(4, 64);
  std::thread t1([] {
    for (int64_t i = 0; i < 5; ++i) stallscope::record(event(i, 1));
  });
  t1.join();
  std::thread t2([] {
    for (int64_t i = 0; i < 5; ++i) stallscope::record(event(i, 2));
  });
  t2.join();
  CHECK_EQ(Collector::drain(7).size(), 7u);
  CHECK_EQ(Collector::drain(7).size(), 3u);
  CHECK_EQ(Collector::buffered(), 0u);
}

TEST(discard_drops_everything_buffered_and_says_how_much) {
  fresh(2, 64);
  for (int64_t i = 0; i < 12; ++i) stallscope::record(event(i, 0));
  CHECK_EQ(Collector::discard(), 12u);
  CHECK_EQ(Collector::buffered(), 0u);
  CHECK_EQ(Collector::discard(), 0u);
}

// Producers record while a collector drains in a loop: per thread, every accepted event comes
// out once and in order; every refused one is a counted drop.
TEST(draining_while_threads_record_loses_and_duplicates_nothing) {
  constexpr int kThreads = 4;
  constexpr int64_t kN = 100000;
  fresh(kThreads, 256);  // small rings: drops happen when the collector falls behind
  std::vector<uint64_t> accepted(kThreads, 0);
  std::atomic<int> running{kThreads};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      uint64_t ok = 0;
      for (int64_t i = 0; i < kN; ++i) ok += stallscope::record(event(i, t)) ? 1 : 0;
      accepted[t] = ok;
      running.fetch_sub(1);
    });
  }
  std::vector<int64_t> last(kThreads, -1);
  std::vector<uint64_t> got(kThreads, 0);
  bool ordered = true, whole = true;
  auto drain = [&] {
    ColumnChunk c = Collector::drain(1000);
    for (size_t k = 0; k < c.size(); ++k) {
      const int32_t lane = c.lane[k];
      if (lane < 0 || lane >= kThreads) {
        whole = false;
        continue;
      }
      const EventRecord e = event(c.correlation[k], lane);
      whole = whole && c.start_ns[k] == e.start_ns && c.end_ns[k] == e.end_ns &&
              c.bytes[k] == e.bytes && c.name_id[k] == e.name_id && c.kind[k] == e.kind;
      ordered = ordered && c.correlation[k] > last[lane];
      last[lane] = c.correlation[k];
      ++got[lane];
    }
    return c.size();
  };
  while (running.load() > 0) {
    if (drain() == 0) std::this_thread::yield();
  }
  for (auto& p : producers) p.join();
  while (drain() != 0) {
  }
  CHECK(ordered);
  CHECK(whole);
  CHECK(got == accepted);
  uint64_t dropped = 0;
  for (const stallscope::ThreadStats& s : g_registry.stats()) dropped += s.dropped;
  uint64_t total = 0;
  for (uint64_t a : accepted) total += a;
  CHECK_EQ(total + dropped, static_cast<uint64_t>(kThreads * kN));
}
