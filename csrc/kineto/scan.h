// One pass over the bytes of a Kineto (Chrome trace) JSON document -> typed columns of its
// traceEvents, without building a DOM. Strings (ph, cat, name, string args) are interned into
// per-column dictionaries (int32 codes, -1 = null). Numbers follow the Python importer's
// general (Polars string) reader exactly: ts / dur become integer ns from the decimal text of the
// value's shortest round-trip form; ints become int64.
//
// Anything outside the common shape (a list where a scalar is expected, a float pid, a
// duplicated key, a non-object event, ...) makes the scan "unsupported": the caller then uses
// its general reader, so results never differ. Malformed JSON is "unsupported" too (the general
// reader produces the error message). Every read is bounds-checked; no input can crash it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stallscope::kineto {

// A per-column string dictionary: value -> code.
class Dict {
 public:
  int32_t intern(std::string_view s);
  const std::deque<std::string>& strings() const { return strs_; }

 private:
  std::deque<std::string> strs_;  // stable storage: the map's keys view into it
  std::unordered_map<std::string_view, int32_t> index_;
};

// A string column: codes into dict (-1 = null).
struct StrCol {
  std::vector<int32_t> codes;
  Dict dict;
};

// An int64 column with validity (0 = null).
struct IntCol {
  std::vector<int64_t> values;
  std::vector<uint8_t> valid;
};

enum StrField { kPh, kCat, kName, kSyncKind, kColl, kDtype, kPg, kPgDesc, kPgRanks, kNumStr };
enum IntField {
  kPid,
  kTid,
  kId,
  kCorrelation,
  kStream,
  kExtId,
  kDevice,
  kBytes,
  kGroupSize,
  kInNelems,
  kOutNelems,
  kTsNs,
  kDurNs,
  kNumInt
};

struct ScanResult {
  bool ok = false;
  std::string reason;  // why unsupported, when !ok
  size_t rows = 0;
  StrCol str[kNumStr];
  IntCol ints[kNumInt];
  std::vector<uint8_t> has_ts, has_dur, ts_is_float;
  // ts / dur as float64 (what a typed decoder such as msgspec yields); any_float: a value was
  // written with a fraction or exponent.
  std::vector<double> ts_f64, dur_f64;
  bool ts_any_float = false, dur_any_float = false;
  // Byte span of `"traceEvents": [...]` (key to end of value) in the input.
  size_t events_begin = 0, events_end = 0;
};

// Scans `data` (the whole, decompressed document).
void scan(std::string_view data, ScanResult& out);

}  // namespace stallscope::kineto
