// HTA's rows of an events frame: which rows HolisticTraceAnalysis 0.5.0 analyses, in its order,
// with its µs times and each GPU row's launch time. The rules are documented where the result is
// used, python/stallscope/analysis/hta/_loading.py; this is one pass over the columns instead of
// a few dozen NumPy passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stallscope::analysis {

// Per rank, from the importer's trace mark: how its timestamps were written.
struct HtaRankFact {
  int32_t rank;
  int64_t base_ns;  // baseTimeNanoseconds of the rank's file
  bool ts_float;    // ts were floats (ns resolution) rather than integer µs
  bool has_row0;    // the file's first row was kept
  int64_t row0_ns;  // start of that row, ns (when has_row0)
};

struct HtaRowsIn {
  size_t n = 0;                   // rows of the events frame
  const uint8_t* kind = nullptr;  // kind code (_schema.KINDS position)
  const int32_t* rank = nullptr;
  const int64_t* start = nullptr;  // ns
  const int64_t* end = nullptr;    // ns
  const int32_t* lane = nullptr;   // the stream of GPU kinds
  const int64_t* corr = nullptr;   // correlation, 0 when none
  const uint32_t* name = nullptr;  // code of the row's name (string_codes)
  // Per kind code: whether HTA has such rows; whether the kind is GPU activity.
  const uint8_t* hta_kind = nullptr;
  const uint8_t* gpu_kind = nullptr;
  size_t n_kinds = 0;
  uint8_t runtime_kind = 0;  // the kind of runtime calls (their correlation links a GPU row)
  // Per name code: "Event Sync" / "Context Sync" (GPU rows without a stream); contains
  // "ProfilerStep".
  const uint8_t* name_sync = nullptr;
  const uint8_t* name_step = nullptr;
  size_t n_names = 0;
  std::vector<HtaRankFact> facts;  // one per rank with a trace mark; others: base 0, floats
  bool include_last_step = false;  // false: HTA's default last-step filter
  // Only the rows with a stream (GPU activity kinds), in the same order: what HTA's kernel
  // views read. Their values are the same as in the whole output.
  bool gpu_only = false;
};

// One entry per HTA row, in HTA's order (a row repeats where HTA's merge repeats it).
struct HtaRowsOut {
  std::vector<int64_t> row;  // position in the events frame
  std::vector<int32_t> rank;
  std::vector<uint8_t> kind;
  std::vector<int64_t> name;    // name code
  std::vector<int64_t> stream;  // -1 for rows of no GPU kind
  std::vector<int64_t> corr;    // -1 when none
  std::vector<uint8_t> is_gpu;  // 0 / 1
  std::vector<double> ts, end;  // HTA's µs, shifted so the earliest ts is 0
  std::vector<double> runtime;  // GPU rows: aligned ts of their launch, NaN when none
};

// Throws std::invalid_argument for codes outside the tables.
HtaRowsOut hta_rows(const HtaRowsIn& in);

}  // namespace stallscope::analysis
