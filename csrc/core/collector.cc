#include "collector.h"

#include <cstring>

#include "thread_registry.h"

namespace stallscope {

void ColumnChunk::resize(size_t n) {
  start_ns.resize(n);
  end_ns.resize(n);
  correlation.resize(n);
  bytes.resize(n);
  name_id.resize(n);
  detail_id.resize(n);
  lane.resize(n);
  device.resize(n);
  kind.resize(n);
  category.resize(n);
}

std::mutex& Collector::lock() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

namespace {

bool drainable(const ThreadSlot& s) {
  const int st = s.state.load(std::memory_order_acquire);
  return st == static_cast<int>(SlotState::kOwned) || st == static_cast<int>(SlotState::kRetired);
}

}  // namespace

ColumnChunk Collector::drain(uint64_t max_events) {
  std::lock_guard<std::mutex> guard(lock());
  ThreadRegistry& reg = g_registry;
  const uint32_t n_slots = reg.num_slots();
  ThreadSlot* slots = reg.slots();

  // First pass sizes the chunk; the second moves at most that many per ring, so events that
  // arrive in between wait for the next drain.
  std::vector<uint64_t> take(n_slots, 0);
  uint64_t total = 0;
  for (uint32_t i = 0; i < n_slots && total < max_events; ++i) {
    if (!drainable(slots[i])) continue;
    uint64_t n = slots[i].ring.size();
    if (n > max_events - total) n = max_events - total;
    take[i] = n;
    total += n;
  }

  ColumnChunk out;
  out.resize(total);
  size_t pos = 0;
  for (uint32_t i = 0; i < n_slots; ++i) {
    if (take[i] != 0) {
      slots[i].ring.consume(take[i], [&](const EventRecord* rec, uint64_t n) {
        for (uint64_t k = 0; k < n; ++k, ++pos) {
          const EventRecord& e = rec[k];
          out.start_ns[pos] = e.start_ns;
          out.end_ns[pos] = e.end_ns;
          out.correlation[pos] = e.correlation;
          out.bytes[pos] = e.bytes;
          out.name_id[pos] = e.name_id;
          out.detail_id[pos] = e.detail_id;
          out.lane[pos] = e.lane;
          out.device[pos] = e.device;
          out.kind[pos] = e.kind;
          out.category[pos] = e.category;
        }
      });
    }
    reg.recycle_if_drained(&slots[i]);
  }
  return out;
}

uint64_t Collector::buffered() {
  uint64_t total = 0;
  ThreadSlot* slots = g_registry.slots();
  for (uint32_t i = 0; i < g_registry.num_slots(); ++i) {
    if (drainable(slots[i])) total += slots[i].ring.size();
  }
  return total;
}

uint64_t Collector::discard() {
  std::lock_guard<std::mutex> guard(lock());
  uint64_t total = 0;
  ThreadSlot* slots = g_registry.slots();
  for (uint32_t i = 0; i < g_registry.num_slots(); ++i) {
    if (!drainable(slots[i])) continue;
    total += slots[i].ring.consume(~0ULL, [](const EventRecord*, uint64_t) {});
    g_registry.recycle_if_drained(&slots[i]);
  }
  return total;
}

}  // namespace stallscope
