// The two-thread scan (csrc/kineto/segment_worker.h): a second thread reads the later part of
// each buffer from a guessed event start, and the result is the one thread's, value for value
// and code for code, whether the guesses hold (the worker's events taken) or not (strings that
// look like event boundaries); a file left before its end drops the worker's part.
#include <sched.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "kineto/segment_worker.h"
#include "kineto/stream_scanner.h"
#include "synthetic_trace.h"

namespace {

using stallscope::kineto::StreamScanner;
using synthetic::Decoded;

// The scanner reads with one thread on a machine (or affinity mask) of one core.
bool two_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set) >= 2;
  return std::thread::hardware_concurrency() >= 2;
}

// A scanner that splits every buffer of at least 1 KiB, gathering 8 KiB before it reads: many
// splits on a trace of a few hundred KiB.
StreamScanner splitting() { return StreamScanner(1024, 8192); }

}  // namespace

TEST(two_threads_read_what_one_thread_reads) {
  for (bool pretty : {true, false}) {
    const synthetic::Trace t = synthetic::make_trace(pretty ? 21 : 22, 3000, pretty);
    StreamScanner one(0);
    const Decoded want = synthetic::scan(one, t.text, {});
    REQUIRE(want == t.want);
    StreamScanner two = splitting();
    for (size_t step : {100000, 4096, 1000, 77}) {
      const Decoded got = synthetic::scan(two, t.text, synthetic::every(step, t.text.size()));
      CHECK_EQ(got.reason, "");
      CHECK(got == want);
    }
    if (two_cores()) {
      CHECK_GT(two.splits_taken(), 0);
    } else {
      std::printf("one core: the scanner reads with one thread (no split to check)\n");
    }
  }
}

// Codes, not only strings, equal the one thread's: the worker's strings are interned after the
// owner's, in reading order.
TEST(codes_are_the_one_threads_codes) {
  const synthetic::Trace t = synthetic::make_trace(31, 2000, false);
  StreamScanner one(0), two = splitting();
  stallscope::kineto::FileResult a, b;
  one.begin_file();
  REQUIRE(one.feed(t.text));
  REQUIRE(one.end_file(&a));
  two.begin_file();
  REQUIRE(two.feed(t.text));
  REQUIRE(two.end_file(&b));
  for (int c = 0; c < stallscope::kineto::kNumRowStr; ++c) CHECK(a.strs[c] == b.strs[c]);
  CHECK(a.flow_cat == b.flow_cat);
  CHECK(one.names().strings() == two.names().strings());
  CHECK(one.cats().strings() == two.cats().strings());
  CHECK(one.args().strings() == two.args().strings());
}

TEST(wrong_guesses_are_read_by_the_owner) {
  // Every name holds "}, {": most guessed starts fall inside a string.
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 4000; ++i) {
    text += i ? ", " : "";
    text += R"({"ph": "X", "cat": "c", "name": "}, {}, {}, {}, {}, {}, {}, {}, {}, {", "ts": )" +
            std::to_string(i) + R"(, "dur": 1})";
  }
  text += "]}";
  StreamScanner one(0), two = splitting();
  const Decoded want = synthetic::scan(one, text, {});
  REQUIRE(want.ok);
  CHECK_EQ(want.events, 4000);
  CHECK(synthetic::scan(two, text, {}) == want);
  if (two_cores()) CHECK_GT(two.splits_missed(), 0);
}

TEST(a_file_left_before_its_end_drops_the_workers_part) {
  const synthetic::Trace t = synthetic::make_trace(41, 2000, true);
  StreamScanner two = splitting();
  two.begin_file();
  REQUIRE(two.feed(std::string_view(t.text).substr(0, t.text.size() / 2)));
  // Left unfinished: the next file starts over (a split may be pending on the worker).
  const Decoded d = synthetic::scan(two, t.text, {});
  CHECK(d == t.want);
  two.release_buffers();
  CHECK(synthetic::scan(two, t.text, synthetic::every(5000, t.text.size())) == t.want);
}

TEST(broken_text_after_a_split_is_refused_like_one_thread_refuses_it) {
  synthetic::Trace t = synthetic::make_trace(51, 2000, false);
  for (size_t at : {t.text.size() / 3, t.text.size() / 2, t.text.size() * 9 / 10}) {
    std::string m = t.text;
    m.insert(at, "\x01");  // a control byte: inside a string, or a stray byte between values
    StreamScanner one(0), two = splitting();
    const Decoded a = synthetic::scan(one, m, {});
    const Decoded b = synthetic::scan(two, m, synthetic::every(3000, m.size()));
    CHECK(!a.ok);
    CHECK_EQ(a.reason, b.reason);
    CHECK(a == b);
  }
}

TEST(input_space_and_input_done_feed_without_a_copy) {
  const synthetic::Trace t = synthetic::make_trace(61, 1500, true);
  StreamScanner two = splitting();
  two.begin_file(t.text.size());
  size_t at = 0;
  bool ok = true;
  while (at < t.text.size() && ok) {
    StreamScanner::Span space = two.input_space();
    REQUIRE(space.size >= 1);
    const size_t n = std::min({space.size, t.text.size() - at, size_t{777}});
    std::copy(t.text.begin() + static_cast<ptrdiff_t>(at),
              t.text.begin() + static_cast<ptrdiff_t>(at + n), space.data);
    ok = two.input_done(n);
    at += n;
  }
  CHECK(ok);
  stallscope::kineto::FileResult r;
  REQUIRE(two.end_file(&r));
  CHECK(synthetic::decode(r, two) == t.want);
}
