// The streaming Kineto reader (csrc/kineto/stream_scanner.h) on one thread: a tiny trace read
// field by field, the same text cut at every byte, times as integers and as floats, the rows
// the importer drops and why, unknown keys, and broken input (a reason, never a crash; the next
// file reads normally).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "kineto/stream_scanner.h"
#include "synthetic_trace.h"

namespace {

using stallscope::kineto::kNull;
using stallscope::kineto::StreamScanner;
using synthetic::Decoded;
namespace k = stallscope::kineto;

const std::string kTiny = R"({"schemaVersion": 1, "distributedInfo": {"rank": 3},
 "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 1000, "dur": 5,
   "args": {"correlation": 42, "stream": 7, "device": 0, "External id": 9, "bytes": 64}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 990, "dur": 20,
   "args": {"External id": 9, "unknown": [1, {"a": 2}], "Input Dims": [[2, 2], []]}},
  {"ph": "s", "cat": "ac2g", "id": 42, "pid": 1, "tid": 2, "ts": 995, "name": "ac2g"},
  {"ph": "i", "name": "instant", "ts": 3, "s": "t"},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 2,
   "ts": 1010, "dur": 3, "args": {"cuda_sync_kind": "stream_synchronize", "correlation": 43}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 1020,
   "dur": 4, "args": {"Collective name": "allreduce", "In msg nelems": 1024,
   "Out msg nelems": 1024, "Group size": 2, "dtype": "Float", "Process Group Name": "0",
   "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}}
 ],
 "baseTimeNanoseconds": 1700000000000000000})";

Decoded scan_whole(const std::string& text) {
  StreamScanner s(0);
  return synthetic::scan(s, text, {});
}

// A one-event trace around `event` (the text of its object).
std::string one(const std::string& event) { return R"({"traceEvents": [)" + event + "]}"; }

std::string reason_of(const std::string& text) { return scan_whole(text).reason; }

}  // namespace

TEST(tiny_trace_is_read_field_by_field) {
  const Decoded d = scan_whole(kTiny);
  REQUIRE(d.ok);
  CHECK_EQ(d.events, 6);
  CHECK(d.rows[k::kRowIndex] == (std::vector<int64_t>{0, 1, 4, 5}));
  CHECK(d.rows[k::kRowTs] == (std::vector<int64_t>{1000000, 990000, 1010000, 1020000}));
  CHECK(d.rows[k::kRowDur] == (std::vector<int64_t>{5000, 20000, 3000, 4000}));
  CHECK(d.rows[k::kRowPid] == (std::vector<int64_t>{0, 1, 1, 1}));
  CHECK(d.rows[k::kRowTid] == (std::vector<int64_t>{7, 2, 2, 2}));
  CHECK(d.rows[k::kRowCorrelation] == (std::vector<int64_t>{42, kNull, 43, kNull}));
  CHECK(d.rows[k::kRowStream] == (std::vector<int64_t>{7, kNull, kNull, kNull}));
  CHECK(d.rows[k::kRowExtId] == (std::vector<int64_t>{9, 9, kNull, kNull}));
  CHECK(d.rows[k::kRowDevice] == (std::vector<int64_t>{0, kNull, kNull, kNull}));
  CHECK(d.rows[k::kRowBytes] == (std::vector<int64_t>{64, kNull, kNull, kNull}));
  CHECK(d.strs[k::kRowCat] ==
        (std::vector<std::string>{"kernel", "cpu_op", "cuda_runtime", "cpu_op"}));
  CHECK(d.strs[k::kRowName] == (std::vector<std::string>{"k1", "aten::mm", "cudaStreamSynchronize",
                                                         "record_param_comms"}));
  CHECK(d.strs[k::kRowSyncKind] ==
        (std::vector<std::string>{"<null>", "<null>", "stream_synchronize", "<null>"}));
  // The NCCL metadata of the record_param_comms row.
  CHECK(d.nccl[k::kNcclIndex] == (std::vector<int64_t>{5}));
  CHECK(d.nccl[k::kNcclGroupSize] == (std::vector<int64_t>{2}));
  CHECK(d.nccl[k::kNcclInNelems] == (std::vector<int64_t>{1024}));
  CHECK(d.nccl_strs[k::kNcclColl] == (std::vector<std::string>{"allreduce"}));
  CHECK(d.nccl_strs[k::kNcclDtype] == (std::vector<std::string>{"Float"}));
  CHECK(d.nccl_strs[k::kNcclPg] == (std::vector<std::string>{"0"}));
  CHECK(d.nccl_strs[k::kNcclPgDesc] == (std::vector<std::string>{"default_pg"}));
  CHECK(d.nccl_strs[k::kNcclPgRanks] == (std::vector<std::string>{"[0, 1]"}));
  // The flow event.
  CHECK(d.flows[k::kFlowId] == (std::vector<int64_t>{42}));
  CHECK(d.flows[k::kFlowTs] == (std::vector<int64_t>{995000}));
  CHECK(d.flows[k::kFlowPid] == (std::vector<int64_t>{1}));
  CHECK(d.flow_cat == (std::vector<std::string>{"ac2g"}));
  CHECK(!d.ts_float);
  CHECK(d.rank_found);
  CHECK_EQ(d.rank, 3);
  CHECK_EQ(d.meta_json, R"({"traceEvents":[],"schemaVersion": 1,"distributedInfo": {"rank": 3},)"
                        R"("baseTimeNanoseconds": 1700000000000000000})");
  for (int64_t p : d.problems) CHECK_EQ(p, 0);
}

// The text cut in two at every byte, and fed a byte at a time: the same result each time (a
// value cut by a chunk's end is read again whole with the next chunk).
TEST(cuts_at_every_byte_read_the_same) {
  const Decoded whole = scan_whole(kTiny);
  REQUIRE(whole.ok);
  int differ = 0;
  for (size_t cut = 1; cut < kTiny.size(); ++cut) {
    StreamScanner s(0);
    differ += !(synthetic::scan(s, kTiny, {cut}) == whole);
  }
  CHECK_EQ(differ, 0);
  StreamScanner bytewise(0);
  CHECK(synthetic::scan(bytewise, kTiny, synthetic::every(1, kTiny.size())) == whole);
  // Three pieces at random places.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    size_t a = rng() % kTiny.size(), b = rng() % kTiny.size();
    if (a > b) std::swap(a, b);
    StreamScanner s(0);
    differ += !(synthetic::scan(s, kTiny, {a, b}) == whole);
  }
  CHECK_EQ(differ, 0);
}

TEST(made_up_traces_read_as_written_in_any_chunking) {
  for (bool pretty : {true, false}) {
    const synthetic::Trace t = synthetic::make_trace(pretty ? 11 : 12, 400, pretty);
    StreamScanner s(0);
    const Decoded whole = synthetic::scan(s, t.text, {});
    CHECK_EQ(whole.reason, "");
    CHECK(whole == t.want);
    for (size_t step : {1000, 333, 64, 7}) {
      StreamScanner c(0);
      CHECK(synthetic::scan(c, t.text, synthetic::every(step, t.text.size())) == t.want);
    }
  }
}

TEST(one_scanner_reads_file_after_file_sharing_its_dictionaries) {
  StreamScanner s(0);
  const Decoded a = synthetic::scan(s, kTiny, {});
  const Decoded b = synthetic::scan(s, kTiny, {100});
  CHECK(a.ok);
  CHECK(a == b);
  CHECK_EQ(s.cats().strings().size(), 4u);  // kernel, cpu_op, ac2g, cuda_runtime: once each
}

TEST(float_times_make_every_time_of_the_file_a_float) {
  const Decoded d = scan_whole(R"({"traceEvents": [
    {"ph": "X", "cat": "c", "name": "a", "ts": 1000.5, "dur": 2.25},
    {"ph": "X", "cat": "c", "name": "b", "ts": 990, "dur": 1},
    {"ph": "X", "cat": "c", "name": "c", "ts": 4458676522690.655, "dur": 1.0005}]})");
  REQUIRE(d.ok);
  CHECK(d.ts_float);
  CHECK(d.rows[k::kRowTs] == (std::vector<int64_t>{1000500, 990000, 4458676522690655}));
  // The fraction's ns rounded half to even: 1.0005 µs is 1000.4999... ns as a double.
  CHECK(d.rows[k::kRowDur] == (std::vector<int64_t>{2250, 1000, 1000}));
}

TEST(rows_without_dur_or_cat_or_with_bad_times_are_dropped_and_counted) {
  const Decoded d = scan_whole(R"({"traceEvents": [
    {"ph": "X", "cat": "c", "name": "no dur", "ts": 1},
    {"ph": "X", "name": "no cat", "ts": 1, "dur": 1},
    {"ph": "X", "cat": "c", "name": "negative", "ts": 1, "dur": -5},
    {"ph": "X", "cat": "c", "name": "null ts", "ts": null, "dur": 1},
    {"ph": "X", "cat": "c", "name": "kept", "ts": 2, "dur": 3},
    {"ph": "X", "cat": "c", "name": "huge", "ts": 9000000000000000, "dur": 1}]})");
  REQUIRE(d.ok);
  CHECK_EQ(d.problems[k::kNoDur], 1);
  CHECK_EQ(d.problems[k::kNoCat], 1);
  CHECK_EQ(d.problems[k::kNegativeDur], 1);
  CHECK_EQ(d.problems[k::kBadTime], 2);  // the null ts and the one past 9e15 µs
  CHECK(d.strs[k::kRowName] == (std::vector<std::string>{"kept"}));
  CHECK(d.rows[k::kRowIndex] == (std::vector<int64_t>{4}));
  CHECK_EQ(d.events, 6);
}

TEST(unknown_keys_and_values_are_skipped) {
  const Decoded d = scan_whole(
      one(R"({"ph": "X", "zz": {"deep": [[{"x": "}, {"}]]}, "cat": "c", "name": "n", "ts": 1,)"
          R"( "dur": 2, "args": {"grid": [1, 2, 3], "Out msg nelems": 8, "note": "a\"b",)"
          R"( "Global rank start": 0}, "s": "p", "zz": 1})"));
  REQUIRE(d.ok);
  CHECK(d.strs[k::kRowName] == (std::vector<std::string>{"n"}));
  CHECK(d.rows[k::kRowDur] == (std::vector<int64_t>{2000}));
}

TEST(numbers_as_strings_and_nulls_in_integer_fields) {
  const Decoded d = scan_whole(
      one(R"({"ph": "X", "cat": "c", "name": "n", "pid": "12", "tid": "Spans", "ts": 1, "dur": 2,)"
          R"( "args": {"correlation": null, "stream": "-3"}})"));
  REQUIRE(d.ok);
  CHECK_EQ(d.rows[k::kRowPid][0], 12);
  CHECK_EQ(d.rows[k::kRowTid][0], kNull);  // a string without digits reads as null
  CHECK_EQ(d.rows[k::kRowCorrelation][0], kNull);
  CHECK_EQ(d.rows[k::kRowStream][0], -3);
}

TEST(missing_fields_read_as_null) {
  const Decoded d = scan_whole(one(R"({"ph": "X", "cat": "c", "ts": 5, "dur": 0})"));
  REQUIRE(d.ok);
  CHECK(d.strs[k::kRowName] == (std::vector<std::string>{"<null>"}));
  CHECK_EQ(d.rows[k::kRowPid][0], kNull);
  CHECK_EQ(d.rows[k::kRowTid][0], kNull);
  CHECK_EQ(d.rows[k::kRowDur][0], 0);
}

TEST(empty_and_absent_trace_events) {
  const Decoded empty = scan_whole(R"({"traceEvents": [], "x": {}})");
  REQUIRE(empty.ok);
  CHECK_EQ(empty.events, 0);
  CHECK_EQ(empty.meta_json, R"({"traceEvents":[],"x": {}})");
  CHECK_EQ(reason_of(R"({"x": 1})"), "no traceEvents");
  CHECK_EQ(reason_of("{}"), "no traceEvents");
}

TEST(broken_input_is_refused_with_its_reason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {one(R"({"ph": "X", "ph": "X"})"), "duplicate event key"},
      {one(R"({"ph": "X", "pid": 1.5})"), "non-integer in an integer field"},
      {one(R"({"ph": "X", "pid": "12345678901234567890"})"), "numeric string in an integer field"},
      {one(R"({"ph": "X", "pid": [1]})"), "non-scalar in an integer field"},
      {one(R"({"ph": "X", "name": 3})"), "non-string in a string field"},
      {one(R"({"ph": "X", "args": [1]})"), "args not an object"},
      {one(R"({"ph": "X", "args": {"stream": 1, "stream": 2}})"), "duplicate arg"},
      {one(R"({"ph": "X", "args": {"Global rank start": [1]}})"), "non-scalar arg"},
      {one(R"({"ph": "X", "bp": {}})"), "non-scalar bp"},
      {one(R"({"ph": "X", "ts": "12"})"), "non-number time"},
      {one(R"({"ph": "X", "ts": 1e400})"), "float time out of range"},
      {one(R"({"ph": "X", "ts": -0.0})"), "float time out of range"},
      {one(R"({"ph": "X", "ts": 12345678901234567890})"), "integer time beyond int64"},
      {one("1"), "event not an object"},
      {one(R"({"ph": "X",})"), "malformed JSON"},
      {one(R"({"ph": "X"} {"ph": "X"})"), "malformed JSON"},
      {R"({"traceEvents": {}})", "traceEvents not a list"},
      {R"({"traceEvents": [], "traceEvents": []})", "duplicate traceEvents"},
      {R"({"traceEvents": []} x)", "trailing data"},
      {R"({"traceEvents": [{"ph": "X"})", "truncated JSON"},
      {R"({"traceEvents": [)", "truncated JSON"},
      {"", "truncated JSON"},
      {"[]", "malformed JSON"},
      {R"({"traceEvents": [{"name": "\ud800"}]})", "lone surrogate"},
  };
  for (const auto& [text, why] : cases) {
    const Decoded d = scan_whole(text);
    CHECK(!d.ok);
    CHECK_EQ(d.reason, why);
  }
}

TEST(after_a_refused_file_the_next_one_reads_normally) {
  StreamScanner s(0);
  s.begin_file();
  CHECK(!s.feed(one(R"({"ph": "X", "ph": "X"})")));
  CHECK(!s.feed("more text"));  // stays refused
  k::FileResult r;
  CHECK(!s.end_file(&r));
  CHECK_EQ(s.reason(), "duplicate event key");
  const Decoded d = synthetic::scan(s, kTiny, {333});
  CHECK(d.ok);
  CHECK(d == scan_whole(kTiny));
}

// Every one-byte change of the tiny trace is read or refused with a reason, cut anywhere.
TEST(every_single_byte_change_is_read_or_refused) {
  const std::string bytes = "\"\\{}[],:0-e. \x01\xFF";
  int crashes_avoided = 0, refused = 0;
  for (size_t i = 0; i < kTiny.size(); i += 3) {
    for (char b : bytes) {
      std::string m = kTiny;
      m[i] = b;
      StreamScanner s(0);
      const Decoded d = synthetic::scan(s, m, {i / 2 + 1, i + 1});
      refused += !d.ok;
      CHECK(d.ok || !d.reason.empty());
      ++crashes_avoided;
    }
  }
  CHECK_GT(refused, 0);
  CHECK_GT(crashes_avoided, 1000);
}

TEST(rank_is_found_across_chunks_or_left_out) {
  const std::string text = R"({"traceEvents": [], "distributedInfo": {"rank":   12}})";
  for (size_t cut = 1; cut < text.size(); ++cut) {
    StreamScanner s(0);
    const Decoded d = synthetic::scan(s, text, {cut});
    CHECK(d.rank_found);
    CHECK_EQ(d.rank, 12);
  }
  const Decoded none = scan_whole(R"({"traceEvents": [], "rank":12})");  // no blank: HTA's rule
  CHECK(!none.rank_found);
}
