// The per-thread ring (csrc/core/ring.h): order, wrap-around, a full ring that drops and counts
// without blocking, and one producer with one consumer on two threads.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "check.h"
#include "core/ring.h"

namespace {

using stallscope::EventRecord;
using stallscope::Ring;

// A record whose every field derives from i: a torn or stale copy shows in any of them.
EventRecord record_of(uint64_t i) {
  EventRecord e{};
  const auto v = static_cast<int64_t>(i);
  e.start_ns = v;
  e.end_ns = v + 1;
  e.correlation = v;
  e.bytes = v * 3;
  e.name_id = static_cast<uint32_t>(i * 7);
  e.detail_id = static_cast<uint32_t>(i ^ 0x5555);
  e.lane = static_cast<int32_t>(i * 11);
  e.device = static_cast<int16_t>(i & 0x7fff);
  e.kind = static_cast<uint8_t>(i % 16);
  e.category = static_cast<uint8_t>(i % 9);
  return e;
}

bool whole(const EventRecord& e) {
  const auto i = static_cast<uint64_t>(e.correlation);
  const EventRecord w = record_of(i);
  return e.start_ns == w.start_ns && e.end_ns == w.end_ns && e.bytes == w.bytes &&
         e.name_id == w.name_id && e.detail_id == w.detail_id && e.lane == w.lane &&
         e.device == w.device && e.kind == w.kind && e.category == w.category;
}

// Consumes up to max records into `out`; returns how many, and the spans seen.
uint64_t take(Ring& r, uint64_t max, std::vector<int64_t>* out, int* spans = nullptr) {
  return r.consume(max, [&](const EventRecord* rec, uint64_t n) {
    if (spans != nullptr) ++*spans;
    for (uint64_t k = 0; k < n; ++k) out->push_back(rec[k].correlation);
  });
}

}  // namespace

TEST(empty_ring_consumes_nothing) {
  std::vector<EventRecord> storage(8);
  Ring r;
  r.attach(storage.data(), 8);
  std::vector<int64_t> got;
  int spans = 0;
  CHECK_EQ(take(r, 100, &got, &spans), 0u);
  CHECK_EQ(spans, 0);
  CHECK_EQ(r.size(), 0u);
  CHECK_EQ(r.capacity(), 8u);
}

TEST(records_come_out_in_order_and_whole) {
  std::vector<EventRecord> storage(16);
  Ring r;
  r.attach(storage.data(), 16);
  for (uint64_t i = 0; i < 10; ++i) CHECK(r.push(record_of(i)));
  CHECK_EQ(r.size(), 10u);
  CHECK_EQ(r.pushed(), 10u);
  std::vector<EventRecord> got;
  r.consume(100, [&](const EventRecord* rec, uint64_t n) { got.insert(got.end(), rec, rec + n); });
  REQUIRE(got.size() == 10);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK_EQ(got[i].correlation, static_cast<int64_t>(i));
    CHECK(whole(got[i]));
  }
  CHECK_EQ(r.size(), 0u);
}

TEST(consume_takes_at_most_max_oldest_first) {
  std::vector<EventRecord> storage(8);
  Ring r;
  r.attach(storage.data(), 8);
  for (uint64_t i = 0; i < 6; ++i) r.push(record_of(i));
  std::vector<int64_t> got;
  CHECK_EQ(take(r, 4, &got), 4u);
  CHECK(got == (std::vector<int64_t>{0, 1, 2, 3}));
  CHECK_EQ(r.size(), 2u);
  got.clear();
  CHECK_EQ(take(r, 4, &got), 2u);
  CHECK(got == (std::vector<int64_t>{4, 5}));
}

TEST(wrap_around_splits_into_two_spans) {
  std::vector<EventRecord> storage(8);
  Ring r;
  r.attach(storage.data(), 8);
  std::vector<int64_t> got;
  for (uint64_t i = 0; i < 6; ++i) r.push(record_of(i));
  take(r, 6, &got);  // tail at 6: the next 8 records wrap
  got.clear();
  for (uint64_t i = 6; i < 14; ++i) CHECK(r.push(record_of(i)));
  int spans = 0;
  CHECK_EQ(take(r, 100, &got, &spans), 8u);
  CHECK_EQ(spans, 2);  // slots 6..7, then 0..5
  std::vector<int64_t> want;
  for (int64_t i = 6; i < 14; ++i) want.push_back(i);
  CHECK(got == want);
}

TEST(many_laps_keep_order) {
  std::vector<EventRecord> storage(16);
  Ring r;
  r.attach(storage.data(), 16);
  uint64_t next_in = 0, next_out = 0;
  // Uneven batches: every offset of the head and the tail in the ring is visited.
  for (int round = 0; round < 500; ++round) {
    const uint64_t in = 1 + static_cast<uint64_t>(round * 7) % 13;
    for (uint64_t k = 0; k < in && r.size() < 16; ++k) CHECK(r.push(record_of(next_in++)));
    const uint64_t out = 1 + static_cast<uint64_t>(round * 5) % 11;
    r.consume(out, [&](const EventRecord* rec, uint64_t n) {
      for (uint64_t k = 0; k < n; ++k) {
        CHECK_EQ(rec[k].correlation, static_cast<int64_t>(next_out));
        CHECK(whole(rec[k]));
        ++next_out;
      }
    });
  }
  CHECK_GT(next_out, 16u * 20);  // many laps
  CHECK_EQ(r.dropped(), 0u);
}

TEST(full_ring_drops_and_counts_without_blocking) {
  std::vector<EventRecord> storage(8);
  Ring r;
  r.attach(storage.data(), 8);
  for (uint64_t i = 0; i < 8; ++i) CHECK(r.push(record_of(i)));
  for (uint64_t i = 8; i < 13; ++i) CHECK(!r.push(record_of(i)));  // returns: no wait
  CHECK_EQ(r.dropped(), 5u);
  CHECK_EQ(r.pushed(), 8u);
  CHECK_EQ(r.size(), 8u);
  std::vector<int64_t> got;
  take(r, 3, &got);
  CHECK(got == (std::vector<int64_t>{0, 1, 2}));                   // the kept ones are the oldest
  for (uint64_t i = 13; i < 16; ++i) CHECK(r.push(record_of(i)));  // room again
  CHECK(!r.push(record_of(16)));
  CHECK_EQ(r.dropped(), 6u);
  got.clear();
  take(r, 100, &got);
  CHECK(got == (std::vector<int64_t>{3, 4, 5, 6, 7, 13, 14, 15}));
}

TEST(reset_empties_and_zeroes_the_counters) {
  std::vector<EventRecord> storage(8);
  Ring r;
  r.attach(storage.data(), 8);
  for (uint64_t i = 0; i < 10; ++i) r.push(record_of(i));
  r.reset();
  CHECK_EQ(r.size(), 0u);
  CHECK_EQ(r.pushed(), 0u);
  CHECK_EQ(r.dropped(), 0u);
  for (uint64_t i = 0; i < 8; ++i) CHECK(r.push(record_of(i)));  // the whole capacity again
}

// One producer, one consumer: every record pushed arrives once, in order, whole; every record
// refused is counted as dropped.
TEST(producer_and_consumer_on_two_threads_lose_and_duplicate_nothing) {
  constexpr uint64_t kN = 400000;
  std::vector<EventRecord> storage(64);  // small: the ring fills often
  Ring r;
  r.attach(storage.data(), 64);
  std::vector<uint8_t> accepted(kN, 0);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) accepted[i] = r.push(record_of(i)) ? 1 : 0;
    done.store(true, std::memory_order_release);
  });
  std::vector<int64_t> got;
  got.reserve(kN);
  uint64_t torn = 0;
  auto drain = [&] {
    return r.consume(~0ULL, [&](const EventRecord* rec, uint64_t n) {
      for (uint64_t k = 0; k < n; ++k) {
        torn += whole(rec[k]) ? 0 : 1;
        got.push_back(rec[k].correlation);
      }
    });
  };
  while (!done.load(std::memory_order_acquire)) {
    if (drain() == 0) std::this_thread::yield();
  }
  producer.join();
  drain();
  CHECK_EQ(torn, 0u);
  uint64_t n_accepted = 0;
  for (uint8_t a : accepted) n_accepted += a;
  CHECK_EQ(got.size(), n_accepted);
  CHECK_EQ(r.pushed(), n_accepted);
  CHECK_EQ(r.dropped(), kN - n_accepted);
  // Exactly the accepted records, in push order.
  size_t j = 0;
  bool same = true;
  for (uint64_t i = 0; i < kN && same; ++i) {
    if (!accepted[i]) continue;
    same = j < got.size() && got[j] == static_cast<int64_t>(i);
    ++j;
  }
  CHECK(same);
}

// A producer that retries a refused push: with the consumer keeping up, all kN arrive.
TEST(retrying_producer_delivers_every_record) {
  constexpr uint64_t kN = 200000;
  std::vector<EventRecord> storage(16);
  Ring r;
  r.attach(storage.data(), 16);
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) {
      while (!r.push(record_of(i))) std::this_thread::yield();
    }
  });
  uint64_t next = 0, bad = 0;
  while (next < kN) {
    const uint64_t n = r.consume(~0ULL, [&](const EventRecord* rec, uint64_t m) {
      for (uint64_t k = 0; k < m; ++k, ++next) {
        bad += rec[k].correlation == static_cast<int64_t>(next) && whole(rec[k]) ? 0 : 1;
      }
    });
    if (n == 0) std::this_thread::yield();
  }
  producer.join();
  CHECK_EQ(bad, 0u);
  CHECK_EQ(r.pushed(), kN);
  CHECK_EQ(r.size(), 0u);
}
