// The detail column's job (csrc/kineto/detail_job.h): each row's text, long and short rows (in
// the view itself or in a data buffer), parts written by the job's threads and by the caller,
// and the errors: a code past its table, a second start or result, no threads.
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "kineto/detail_job.h"
#include "kineto/stream_scanner.h"

namespace {

using stallscope::kineto::DetailJob;
using stallscope::kineto::kNull;

// Row i of a "vu" column (Arrow's UTF-8 view layout: length, then the string itself when it
// has at most 12 bytes, else a prefix, the data buffer's index and the offset in it).
std::string row(const stallscope::arrow::Column& c, size_t i) {
  const auto* v = static_cast<const uint8_t*>(c.values_data()) + 16 * i;
  int32_t len, blob, offset;
  std::memcpy(&len, v, 4);
  if (len <= 12) return std::string(reinterpret_cast<const char*>(v + 4), static_cast<size_t>(len));
  std::memcpy(&blob, v + 8, 4);
  std::memcpy(&offset, v + 12, 4);
  const std::string& b = c.blobs[static_cast<size_t>(blob)];
  if (std::memcmp(v + 4, b.data() + offset, 4) != 0) return "<prefix differs>";
  return b.substr(static_cast<size_t>(offset), static_cast<size_t>(len));
}

// The rule, written plainly.
std::string want_row(const std::vector<std::string>& cats, int32_t cat, int64_t ext,
                     const std::vector<std::string>& syncs, int32_t sync) {
  std::string s = cats[static_cast<size_t>(cat)];
  if (ext != kNull) s += ";ext=" + std::to_string(ext);
  if (sync >= 0) s += ";sync_kind=" + syncs[static_cast<size_t>(sync)];
  return s;
}

const std::vector<std::string> kCats = {"cat=kernel", "cat=cpu_op", "",
                                        "cat=a category name longer than twelve bytes"};
const std::vector<std::string> kSyncs = {"event_sync", "stream_synchronize"};

}  // namespace

TEST(each_row_is_cat_then_ext_then_sync_kind) {
  const std::vector<int32_t> cat = {0, 1, 2, 3, 2, 0};
  const std::vector<int64_t> ext = {kNull, 9, kNull, -9223372036854775807, 123456789, kNull};
  const std::vector<int32_t> sync = {-1, -1, 1, 0, -1, -1};
  DetailJob job(cat.data(), ext.data(), sync.data(), cat.size(), kCats, kSyncs);
  const auto col = job.result();
  REQUIRE(col->length == 6);
  CHECK_EQ(col->format, "vu");
  CHECK_EQ(col->name, "detail");
  CHECK_EQ(row(*col, 0), "cat=kernel");
  CHECK_EQ(row(*col, 1), "cat=cpu_op;ext=9");
  CHECK_EQ(row(*col, 2), ";sync_kind=stream_synchronize");
  CHECK_EQ(row(*col, 3),
           "cat=a category name longer than twelve bytes;ext=-9223372036854775807;sync_kind="
           "event_sync");
  CHECK_EQ(row(*col, 4), ";ext=123456789");
  CHECK_EQ(row(*col, 5), "cat=kernel");
}

TEST(no_rows) {
  DetailJob job(nullptr, nullptr, nullptr, 0, kCats, kSyncs);
  job.start(2);
  CHECK_EQ(job.result()->length, 0);
}

// Many parts: written by the caller alone, or by threads and the caller; the same rows.
TEST(threads_and_the_caller_write_the_same_rows) {
  const size_t n = DetailJob::kPart * 5 + 123;
  std::vector<int32_t> cat(n), sync(n);
  std::vector<int64_t> ext(n);
  for (size_t i = 0; i < n; ++i) {
    cat[i] = static_cast<int32_t>(i % kCats.size());
    ext[i] = i % 3 == 0 ? kNull : static_cast<int64_t>(i) * 1000003 - 500000000;
    sync[i] = i % 7 == 0 ? static_cast<int32_t>(i % 2) : -1;
  }
  for (size_t threads : {0, 1, 3}) {
    DetailJob job(cat.data(), ext.data(), sync.data(), n, kCats, kSyncs);
    if (threads > 0) job.start(threads);
    const auto col = job.result();
    REQUIRE(col->length == static_cast<int64_t>(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += row(*col, i) != want_row(kCats, cat[i], ext[i], kSyncs, sync[i]);
    CHECK_EQ(bad, 0u);
  }
}

TEST(a_code_past_its_table_is_refused_when_the_job_is_made) {
  const std::vector<int64_t> ext = {kNull};
  const std::vector<int32_t> good_sync = {-1}, bad_sync = {2};
  const std::vector<int32_t> bad_cat = {4}, negative = {-1}, good_cat = {0};
  CHECK_THROWS(DetailJob(bad_cat.data(), ext.data(), good_sync.data(), 1, kCats, kSyncs),
               std::out_of_range);
  CHECK_THROWS(DetailJob(negative.data(), ext.data(), good_sync.data(), 1, kCats, kSyncs),
               std::out_of_range);
  CHECK_THROWS(DetailJob(good_cat.data(), ext.data(), bad_sync.data(), 1, kCats, kSyncs),
               std::out_of_range);
}

TEST(start_and_result_are_one_shot) {
  const std::vector<int32_t> cat = {0}, sync = {-1};
  const std::vector<int64_t> ext = {kNull};
  DetailJob job(cat.data(), ext.data(), sync.data(), 1, kCats, kSyncs);
  CHECK_THROWS(job.start(0), std::invalid_argument);
  job.start(1);
  CHECK_THROWS(job.start(1), std::logic_error);
  CHECK_EQ(row(*job.result(), 0), "cat=kernel");
  CHECK_THROWS(job.result(), std::logic_error);
}

TEST(a_job_dropped_unfinished_joins_its_threads) {
  const size_t n = DetailJob::kPart * 4;
  std::vector<int32_t> cat(n, 3), sync(n, 1);
  std::vector<int64_t> ext(n, 42);
  {
    DetailJob job(cat.data(), ext.data(), sync.data(), n, kCats, kSyncs);
    job.start(2);
  }  // no result taken: the destructor waits for the threads (they read the inputs)
  CHECK(true);
}
