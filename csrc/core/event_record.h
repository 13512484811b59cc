// The one event record every backend writes. Mirrors python/stallscope/_schema.py:
// a test checks that the kinds, categories and field layout agree.
#pragma once

#include <cstdint>

namespace stallscope {

// What produced the event. Values are stable: they are stored in run directories.
enum class Kind : uint8_t {
  kRegion = 0,       // CPU region (enter..exit) on one thread
  kMark = 1,         // instant marker on one thread
  kStep = 2,         // step boundary; correlation = step index
  kCounter = 3,      // sampled value; bytes holds the IEEE-754 bits of a double
  kDataWait = 4,     // the main thread waiting for the next batch
  kKernel = 5,       // GPU kernel
  kMemcpy = 6,       // GPU copy; bytes = bytes copied
  kMemset = 7,       // GPU memset; bytes = bytes set
  kGpuSync = 8,      // CUDA synchronisation (stream, event, context)
  kRuntime = 9,      // CUDA runtime / driver API call
  kMarker = 10,      // NVTX range or marker
  kCollective = 11,  // collective; correlation = per-group sequence number
  kP2p = 12,         // point-to-point send or recv
  kBucket = 13,      // DDP gradient bucket all-reduce; correlation = bucket index
  kOverhead = 14,    // tracer overhead (CUPTI's own, buffer flushes)
  kClockSync = 15,   // clock exchange sample; bytes = round trip ns
};
constexpr int kNumKinds = 16;

// Where the time goes, from the point of view of the stall tables.
enum class Category : uint8_t {
  kHost = 0,       // CPU-side work that is none of the below (default for regions)
  kCompute = 1,    // compute kernels, forward / backward / optimizer regions
  kMemcpy = 2,     // copies and memsets
  kComm = 3,       // collectives and point-to-point transfers
  kData = 4,       // waiting for data, split unknown
  kDataFetch = 5,  // data loading I/O
  kDataPrep = 6,   // decode and augmentation
  kSync = 7,       // device synchronisation
  kOther = 8,      // anything that must not count as any of the above
};
constexpr int kNumCategories = 9;

// 48 bytes, no padding, trivially copyable: rings hold these by value.
struct EventRecord {
  int64_t start_ns;     // start, ns, process clock (CLOCK_MONOTONIC)
  int64_t end_ns;       // end, ns, process clock; equal to start_ns for instants
  int64_t correlation;  // CUPTI correlation id, step index, collective sequence number; 0 = none
  int64_t bytes;        // payload size in bytes; for kCounter the bits of the double value
  uint32_t name_id;     // string-table id of the name (0 = "")
  uint32_t detail_id;   // string-table id of "key=value;..." details (0 = none)
  int32_t lane;         // OS thread id for host events, stream id for GPU events
  int16_t device;       // GPU ordinal; -1 for the host
  uint8_t kind;         // Kind
  uint8_t category;     // Category
};

static_assert(sizeof(EventRecord) == 48, "EventRecord must stay 48 bytes");

}  // namespace stallscope

namespace stallscope {

// Names as stored in run directories; index = enum value. Mirrors _schema.KINDS / CATEGORIES.
inline constexpr const char* kKindNames[kNumKinds] = {
    "region",   "mark",    "step",   "counter",    "data_wait", "kernel", "memcpy",   "memset",
    "gpu_sync", "runtime", "marker", "collective", "p2p",       "bucket", "overhead", "clock_sync",
};
inline constexpr const char* kCategoryNames[kNumCategories] = {
    "host", "compute", "memcpy", "comm", "data", "data_fetch", "data_prep", "sync", "other",
};

}  // namespace stallscope
