// The thread registry (csrc/core/thread_registry.h): the pool's sizes, slots claimed at a
// thread's first event and given back at its exit, a full pool and a full ring counted as
// drops, reconfiguration, and the child of a fork() starting empty with recording off.
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "core/collector.h"
#include "core/recorder.h"
#include "core/stress_record.h"
#include "core/string_table.h"
#include "core/thread_registry.h"

namespace {

using stallscope::Category;
using stallscope::Collector;
using stallscope::EventRecord;
using stallscope::g_registry;
using stallscope::Kind;
using stallscope::ThreadStats;

EventRecord event(int64_t correlation) {
  EventRecord e = stallscope::host_event(Kind::kRegion, Category::kCompute, 1, 100, 200);
  e.correlation = correlation;
  return e;
}

// A fresh pool, recording on, nothing buffered and no counts left from an earlier case.
void fresh(uint32_t threads, uint64_t capacity) {
  g_registry.set_enabled(false);
  Collector::discard();
  // Through another size first: always a new pool, no claim or count of an earlier case.
  REQUIRE(g_registry.configure(threads + 1, capacity));
  REQUIRE(g_registry.configure(threads, capacity));
  g_registry.reset_stats();
  g_registry.set_enabled(true);
}

uint64_t sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

}  // namespace

TEST(configure_rounds_the_ring_up_to_a_power_of_two) {
  g_registry.set_enabled(false);
  REQUIRE(g_registry.configure(3, 10));
  CHECK(g_registry.configured());
  CHECK_EQ(g_registry.max_threads(), 3u);
  CHECK_EQ(g_registry.ring_capacity(), 16u);
  REQUIRE(g_registry.configure(2, 100));
  CHECK_EQ(g_registry.ring_capacity(), 128u);
  REQUIRE(g_registry.configure(0, 0));  // at least one thread, 16 records
  CHECK_EQ(g_registry.max_threads(), 1u);
  CHECK_EQ(g_registry.ring_capacity(), 16u);
}

TEST(nothing_is_recorded_while_recording_is_off) {
  fresh(2, 16);
  g_registry.set_enabled(false);
  CHECK(!stallscope::recording());
  CHECK(!stallscope::record(event(1)));
  CHECK_EQ(Collector::buffered(), 0u);
  CHECK(g_registry.stats().empty());  // no slot claimed either
}

TEST(first_event_claims_a_slot_for_the_thread) {
  fresh(2, 16);
  CHECK(stallscope::record(event(7)));
  CHECK(stallscope::record(event(8)));
  const std::vector<ThreadStats> s = g_registry.stats();
  REQUIRE(s.size() == 1);
  CHECK_EQ(s[0].tid, static_cast<int32_t>(syscall(SYS_gettid)));
  CHECK_EQ(s[0].tid, stallscope::current_lane());
  CHECK_EQ(s[0].recorded, 2u);
  CHECK_EQ(s[0].buffered, 2u);
  CHECK_EQ(s[0].dropped, 0u);
  CHECK(s[0].live);
  stallscope::ColumnChunk c = Collector::drain(~0ULL);
  REQUIRE(c.size() == 2);
  CHECK_EQ(c.correlation[0], 7);
  CHECK_EQ(c.correlation[1], 8);
  CHECK_EQ(c.lane[0], stallscope::current_lane());
  CHECK_EQ(c.device[0], -1);
}

TEST(a_thread_slot_is_retired_at_exit_and_recycled_once_drained) {
  fresh(1, 16);
  std::thread t([] {
    pthread_setname_np(pthread_self(), "worker-7");
    for (int i = 0; i < 3; ++i) stallscope::record(event(i));
  });
  t.join();
  std::vector<ThreadStats> s = g_registry.stats();
  REQUIRE(s.size() == 1);
  CHECK(!s[0].live);
  CHECK_EQ(s[0].buffered, 3u);
  CHECK_EQ(s[0].thread_name, "worker-7");
  CHECK_EQ(Collector::drain(~0ULL).size(), 3u);  // drained, then recycled
  s = g_registry.stats();
  REQUIRE(s.size() == 1);  // its counts are kept
  CHECK_EQ(s[0].recorded, 3u);
  CHECK_EQ(s[0].buffered, 0u);
  CHECK(!s[0].live);
  // The one slot is free again: another thread gets it.
  const stallscope::StressResult r = stallscope::stress_record(1, 5, 0, false);
  CHECK_EQ(r.accepted[0], 5u);
  CHECK_EQ(g_registry.no_slot_drops(), 0u);
}

TEST(a_full_pool_drops_and_counts_the_events_of_threads_without_a_slot) {
  fresh(2, 64);
  // Three threads hold their slots at once: one of them finds none.
  stallscope::StressResult r = stallscope::stress_record(3, 10, 0, false);
  std::sort(r.accepted.begin(), r.accepted.end());
  CHECK(r.accepted == (std::vector<uint64_t>{0, 10, 10}));
  CHECK_EQ(g_registry.no_slot_drops(), 10u);
  CHECK_EQ(Collector::drain(~0ULL).size(), 20u);
}

TEST(a_full_ring_drops_and_counts_without_blocking) {
  fresh(1, 16);
  const stallscope::StressResult r = stallscope::stress_record(1, 40, 0, false);
  CHECK_EQ(r.accepted[0], 16u);
  const std::vector<ThreadStats> s = g_registry.stats();
  REQUIRE(s.size() == 1);
  CHECK_EQ(s[0].recorded, 16u);
  CHECK_EQ(s[0].dropped, 24u);
  stallscope::ColumnChunk c = Collector::drain(~0ULL);
  REQUIRE(c.size() == 16);
  for (size_t i = 0; i < c.size(); ++i) CHECK_EQ(c.correlation[i], static_cast<int64_t>(i));
  g_registry.reset_stats();
  CHECK(g_registry.stats().empty());
}

TEST(reset_stats_counts_from_zero_again) {
  fresh(1, 16);
  for (int i = 0; i < 20; ++i) stallscope::record(event(i));
  std::vector<ThreadStats> s = g_registry.stats();
  REQUIRE(s.size() == 1);
  CHECK_EQ(s[0].recorded, 16u);
  CHECK_EQ(s[0].dropped, 4u);
  g_registry.reset_stats();
  s = g_registry.stats();
  REQUIRE(s.size() == 1);
  CHECK_EQ(s[0].recorded, 0u);
  CHECK_EQ(s[0].dropped, 0u);
  CHECK_EQ(s[0].buffered, 16u);  // still in the ring
}

TEST(reconfiguring_moves_threads_to_the_new_pool) {
  fresh(1, 16);
  CHECK(stallscope::record(event(1)));
  const uint64_t gen = g_registry.generation();
  g_registry.set_enabled(false);
  REQUIRE(g_registry.configure(2, 32));
  CHECK_GT(g_registry.generation(), gen);
  CHECK_EQ(Collector::buffered(), 0u);  // a new pool: the old one's event is not in it
  g_registry.set_enabled(true);
  CHECK(stallscope::record(event(2)));  // the old claim is void: a slot of the new pool
  stallscope::ColumnChunk c = Collector::drain(~0ULL);
  REQUIRE(c.size() == 1);
  CHECK_EQ(c.correlation[0], 2);
  // Asking for the same sizes again keeps the pool (and the claims).
  const uint64_t now = g_registry.generation();
  REQUIRE(g_registry.configure(2, 32));
  CHECK_EQ(g_registry.generation(), now);
}

TEST(a_forked_child_starts_with_recording_off_and_empty_rings) {
  fresh(2, 64);
  for (int i = 0; i < 5; ++i) stallscope::record(event(i));
  REQUIRE(Collector::buffered() == 5);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child: each failed expectation sets a bit of the exit status.
    int bad = 0;
    bad |= stallscope::recording() ? 1 : 0;
    bad |= Collector::buffered() != 0 ? 2 : 0;
    bad |= stallscope::record(event(99)) ? 4 : 0;
    // The locks are usable (a parent thread may have held them at the fork).
    bad |= stallscope::StringTable::instance().intern("child") == 0 ? 8 : 0;
    bad |= Collector::drain(~0ULL).size() != 0 ? 16 : 0;
    g_registry.set_enabled(true);  // a trace of its own records normally
    bad |= !stallscope::record(event(100)) ? 32 : 0;
    bad |= Collector::buffered() != 1 ? 64 : 0;
    _exit(bad);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  CHECK_EQ(Collector::buffered(), 5u);  // the parent's are untouched
  CHECK(stallscope::recording());
}

TEST(threads_recording_at_once_each_get_their_own_ring) {
  fresh(8, 1 << 12);
  const stallscope::StressResult r = stallscope::stress_record(4, 1000, 3, true);
  CHECK_EQ(sum(r.accepted), 4000u);
  stallscope::ColumnChunk c = Collector::drain(~0ULL);
  REQUIRE(c.size() == 4000);
  // Per lane (the thread's index), correlations 0..999 in order.
  std::vector<int64_t> next(4, 0);
  bool ordered = true;
  for (size_t i = 0; i < c.size(); ++i) {
    const int32_t lane = c.lane[i];
    ordered = ordered && lane >= 0 && lane < 4 && c.correlation[i] == next[lane]++;
    ordered = ordered && c.name_id[i] == 3 && c.start_ns[i] == c.end_ns[i] && c.start_ns[i] > 0;
  }
  CHECK(ordered);
  CHECK(next == (std::vector<int64_t>{1000, 1000, 1000, 1000}));
}
