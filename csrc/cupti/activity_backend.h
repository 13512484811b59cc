// The CUPTI activity backend: registers stallscope's clock, enables the activity kinds, hands
// CUPTI buffers from a capped pool and turns completed buffers into EventRecords via record().
// Every record that does not become an event is counted (Stats).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stallscope::cupti {

// Category value of GPU events the backend leaves to the shared Python classifier: the writer
// (python/stallscope/capture/_writer.py, _UNCLASSIFIED) replaces it before anything is stored.
inline constexpr uint8_t kCategoryUnclassified = 0xff;

struct Options {
  uint64_t buffer_bytes = 4ull << 20;       // one host buffer handed to CUPTI
  uint64_t pool_limit_bytes = 64ull << 20;  // all buffers together; past it requests are declined
  uint32_t flush_period_ms = 0;             // CUPTI's periodic worker flush; 0 = CUPTI's default
  uint64_t device_buffer_bytes = 0;         // CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE; 0 = default
  bool runtime_api = true;                  // launch / copy / sync runtime+driver API records
  bool markers = true;                      // NVTX (MARKER)
  bool overhead = true;                     // CUPTI's own overhead (OVERHEAD)
  bool external_correlation = true;         // step / region ids from the Python API
};

struct StartResult {
  bool ok = false;
  int code = 0;                      // the failing CUptiResult, 0 on success
  std::string error;                 // what failed, for the user
  bool other_subscriber = false;     // cuptiSubscribe said another tool holds CUPTI
  std::vector<std::string> enabled;  // activity kinds enabled
  std::vector<std::string> failed;   // kinds CUPTI refused (not fatal), "KIND: ERROR"
};

struct Stats {
  uint64_t buffers_requested = 0;
  uint64_t buffers_completed = 0;
  uint64_t buffers_declined = 0;  // pool exhausted: NULL buffer returned, CUPTI drops records
  uint64_t pool_bytes = 0;        // allocated now
  uint64_t pool_peak_bytes = 0;
  uint64_t buffers_outstanding = 0;  // after stop: buffers CUPTI completed to someone else
  uint64_t records = 0;              // records read from completed buffers
  uint64_t kernels = 0, memcpys = 0, memsets = 0, syncs = 0, runtime_calls = 0, markers = 0,
           overheads = 0, external_correlations = 0;
  uint64_t events = 0;               // events accepted by record()
  uint64_t events_not_recorded = 0;  // record() refused (ring full, counted by the core too, or
                                     // recording already off)
  uint64_t cupti_dropped = 0;        // cuptiActivityGetNumDroppedRecords, summed
  // What that count held when this session began: records CUPTI dropped after the previous
  // session's last read (in its cuptiFinalize, where no buffer is taken), not this trace's.
  uint64_t cupti_dropped_before = 0;
  uint64_t incomplete = 0;         // INVALID_KIND stops, records with missing timestamps
  uint64_t unknown_kind = 0;       // records of kinds stallscope does not read
  uint64_t unmatched_markers = 0;  // NVTX range starts never ended, ends never started
  uint64_t distinct_kernel_names = 0;
  uint64_t ext_push_errors = 0;  // push/pop of external ids CUPTI refused
  uint64_t flushes = 0;
};

// Loaded library required (cupti_loader.h). Returns ok=false with the reason on any failure of a
// required step; everything it enabled is disabled again then.
StartResult start(const Options& opts);
// Forced flush, disable, counts the drops, then cuptiFinalize (if finalize). Idempotent.
Stats stop(bool finalize);
bool active() noexcept;
Stats stats();
// cuptiActivityFlushAll(forced ? FORCED : 0); returns the CUptiResult.
int flush(bool forced);
// cuptiSubscribe with a no-op callback, then cuptiUnsubscribe: 0 when CUPTI's single callback
// subscriber slot is free, 39 (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) when another tool holds it,
// -1 when the library has no cuptiSubscribe.
int probe_subscriber();

}  // namespace stallscope::cupti
