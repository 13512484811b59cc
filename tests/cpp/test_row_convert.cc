// The native importer's row conversion (csrc/kineto/row_convert.h): the order (rank, start,
// event index, file), the trace marks, the per-row rules (kinds, lanes, devices, categories,
// correlations, bytes, clipping), dropped categories, the links, one thread against several,
// and codes outside their tables.
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "check.h"
#include "core/event_record.h"
#include "kineto/row_convert.h"
#include "kineto/stream_scanner.h"

namespace {

using stallscope::Category;
using stallscope::Kind;
using stallscope::kineto::FileIn;
using stallscope::kineto::kNull;
using stallscope::kineto::RowsOut;
using stallscope::kineto::Tables;
namespace k = stallscope::kineto;

constexpr uint8_t u8(Kind v) { return static_cast<uint8_t>(v); }
constexpr uint8_t u8(Category v) { return static_cast<uint8_t>(v); }

// Categories: 0 kernel, 1 cpu_op, 2 cuda_runtime, 3 gpu_memcpy, 4 Trace (dropped), 5 a marker.
// Names: 0 gemm, 1 ProfilerStep#4, 2 cudaLaunchKernel, 3 Memcpy HtoD, 4 "" (for rows without).
struct Facts {
  std::vector<uint8_t> cat_kind{u8(Kind::kKernel), u8(Kind::kRegion), u8(Kind::kRuntime),
                                u8(Kind::kMemcpy), u8(Kind::kRegion), u8(Kind::kMarker)};
  std::vector<uint8_t> cat_drop{0, 0, 0, 0, 1, 0};
  std::vector<int64_t> name_step{kNull, 4, kNull, kNull, kNull};
  std::vector<uint8_t> name_gpu_cat{u8(Category::kCompute), u8(Category::kHost),
                                    u8(Category::kHost), u8(Category::kMemcpy),
                                    u8(Category::kOther)};
  std::vector<uint8_t> kind_gpu = std::vector<uint8_t>(stallscope::kNumKinds, 0);
  std::vector<uint8_t> kind_order = std::vector<uint8_t>(stallscope::kNumKinds, 0);
  Facts() {
    kind_gpu[u8(Kind::kKernel)] = kind_gpu[u8(Kind::kMemcpy)] = kind_gpu[u8(Kind::kMemset)] = 1;
    for (int i = 0; i < stallscope::kNumKinds; ++i) kind_order[i] = static_cast<uint8_t>(15 - i);
  }
  Tables tables() const {
    return Tables{cat_kind.data(),
                  cat_drop.data(),
                  cat_kind.size(),
                  name_step.data(),
                  name_gpu_cat.data(),
                  name_step.size(),
                  4,
                  kind_gpu.data()};
  }
};

// One file's scanner columns, row by row.
struct Rows {
  std::vector<int32_t> cat, name, sync;
  std::vector<int64_t> index, ts, dur, pid, tid, stream, device, corr, bytes, ext;
  struct Row {
    int32_t cat, name = 0;
    int64_t index, ts, dur = 1, pid = 1, tid = 1, stream = kNull, device = kNull, corr = kNull,
                       bytes = kNull, ext = kNull;
    int32_t sync = -1;
  };
  void add(const Row& r) {
    cat.push_back(r.cat);
    name.push_back(r.name);
    sync.push_back(r.sync);
    index.push_back(r.index);
    ts.push_back(r.ts);
    dur.push_back(r.dur);
    pid.push_back(r.pid);
    tid.push_back(r.tid);
    stream.push_back(r.stream);
    device.push_back(r.device);
    corr.push_back(r.corr);
    bytes.push_back(r.bytes);
    ext.push_back(r.ext);
  }
  FileIn file(int32_t rank, int64_t base) const {
    FileIn f{rank, base, {}};
    f.rows.n = cat.size();
    f.rows.cat = cat.data();
    f.rows.name = name.data();
    f.rows.sync = sync.data();
    f.rows.index = index.data();
    f.rows.ts = ts.data();
    f.rows.dur = dur.data();
    f.rows.pid = pid.data();
    f.rows.tid = tid.data();
    f.rows.stream = stream.data();
    f.rows.device = device.data();
    f.rows.correlation = corr.data();
    f.rows.bytes = bytes.data();
    f.rows.ext = ext.data();
    return f;
  }
};

template <typename T>
std::vector<T> col(const T* p, size_t n) {
  return std::vector<T>(p, p + n);
}

// Every output column as vectors, for comparing two conversions.
struct Columns {
  std::vector<int64_t> start, end, corr, bytes, ext, index, out_row;
  std::vector<int32_t> rank, pid, lane, name, cat, sync;
  std::vector<int16_t> device;
  std::vector<uint8_t> kind, category, kind_order;
  std::vector<int64_t> file_row0, file_kept;
  bool operator==(const Columns&) const = default;
};

Columns columns(const RowsOut& o) {
  const size_t n = o.rows;
  Columns c{col(o.start, n),
            col(o.end, n),
            col(o.correlation, n),
            col(o.bytes, n),
            col(o.ext, n),
            {},
            {},
            col(o.rank, n),
            col(o.pid, n),
            col(o.lane, n),
            col(o.name, n),
            col(o.cat, n),
            col(o.sync, n),
            col(o.device, n),
            col(o.kind, n),
            col(o.category, n),
            {},
            o.file_row0,
            o.file_kept};
  if (o.index != nullptr) {
    c.index = col(o.index, n);
    c.kind_order = col(o.kind_order, n);
    c.out_row = col(o.out_row, o.inputs);
  }
  return c;
}

constexpr int32_t kMarkCat0 = 100, kMarkName = 200;

}  // namespace

TEST(rows_are_ordered_marked_and_converted_by_the_rules) {
  const Facts facts;
  Rows f0, f1;
  f0.add({.cat = 1, .name = 1, .index = 0, .ts = 50, .dur = 100, .pid = 10, .tid = 11});
  f0.add({.cat = 0,
          .name = 0,
          .index = 1,
          .ts = 60,
          .dur = 5,
          .tid = 99,
          .stream = 7,
          .device = 0,
          .corr = 42,
          .bytes = 64,
          .ext = 9});
  f0.add({.cat = 4, .name = 0, .index = 2, .ts = 1});  // category Trace: dropped
  f0.add({.cat = 3, .name = 3, .index = 3, .ts = 55, .dur = 2, .pid = 3, .tid = 12, .bytes = 100});
  f0.add({.cat = 2, .name = 2, .index = 4, .ts = 58, .tid = 12, .corr = 42, .sync = 0});
  f0.add({.cat = 5, .name = -1, .index = 5, .ts = 50, .pid = 3000000});  // a marker, no name
  f0.add({.cat = 1, .name = 0, .index = 6, .ts = 70, .pid = 5000000000, .tid = -5000000000});
  f1.add({.cat = 0, .name = 0, .index = 0, .ts = 10, .dur = 1, .stream = 3, .corr = 7});
  f1.add({.cat = 1, .name = 0, .index = 1, .ts = 5, .dur = 2, .ext = -3});
  const std::vector<FileIn> files = {f0.file(1, 1000), f1.file(0, 0)};
  const RowsOut o = k::convert_rows(facts.tables(), files, facts.kind_order.data(), kMarkCat0,
                                    kMarkName, 1, true);
  CHECK_EQ(o.rows, 10u);  // 6 + 2 rows kept, a mark per file
  CHECK_EQ(o.inputs, 9u);
  const Columns c = columns(o);
  // Rank 0 (file 1) first: its mark at the rank's first start, then its rows by start; then
  // rank 1 (file 0), ties by event index.
  const int64_t kMin32 = std::numeric_limits<int32_t>::min();
  const int64_t kMax32 = std::numeric_limits<int32_t>::max();
  CHECK(c.rank == (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  CHECK(c.start == (std::vector<int64_t>{5, 5, 10, 1050, 1050, 1050, 1055, 1058, 1060, 1070}));
  CHECK(c.end == (std::vector<int64_t>{5, 7, 11, 1050, 1150, 1051, 1057, 1059, 1065, 1071}));
  CHECK(c.index == (std::vector<int64_t>{-1, 1, 0, -1, 0, 5, 3, 4, 1, 6}));
  const auto M = u8(Kind::kMark);
  CHECK(c.kind == (std::vector<uint8_t>{M, u8(Kind::kRegion), u8(Kind::kKernel), M, u8(Kind::kStep),
                                        u8(Kind::kMarker), u8(Kind::kMemcpy), u8(Kind::kRuntime),
                                        u8(Kind::kKernel), u8(Kind::kRegion)}));
  CHECK(c.name == (std::vector<int32_t>{kMarkName, 0, 0, kMarkName, 1, 4, 3, 2, 0, 0}));
  CHECK(c.cat == (std::vector<int32_t>{kMarkCat0 + 1, 1, 0, kMarkCat0, 1, 5, 3, 2, 0, 1}));
  CHECK(c.pid == (std::vector<int32_t>{0, 1, 1, 0, 10, 3000000, 3, 1, 1, kMax32}));
  // GPU rows: the stream (the tid without one); the rest the tid, clipped to int32.
  CHECK(c.lane == (std::vector<int32_t>{0, 1, 3, 0, 11, 1, 12, 12, 7, kMin32}));
  // GPU rows and markers: the device (the pid without one), clipped to -1..32767.
  CHECK(c.device == (std::vector<int16_t>{-1, -1, 1, -1, -1, 32767, 3, -1, 0, -1}));
  const auto H = u8(Category::kHost);
  CHECK(c.category ==
        (std::vector<uint8_t>{H, H, u8(Category::kCompute), H, H, u8(Category::kOther),
                              u8(Category::kMemcpy), H, u8(Category::kCompute), H}));
  // Steps: their number; GPU and runtime rows: their correlation; the rest 0.
  CHECK(c.corr == (std::vector<int64_t>{0, 0, 7, 0, 4, 0, 0, 42, 42, 0}));
  CHECK(c.bytes == (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 100, 0, 0, 0}));  // copies only
  CHECK(c.ext ==
        (std::vector<int64_t>{kNull, -3, kNull, kNull, kNull, kNull, kNull, kNull, 9, kNull}));
  CHECK(c.sync == (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, -1, 0, -1, -1}));
  CHECK(c.kind_order == (std::vector<uint8_t>{14, 15, 10, 14, 13, 5, 9, 6, 10, 15}));
  // Input rows in file order -> output rows (-1: dropped).
  CHECK(c.out_row == (std::vector<int64_t>{4, 8, -1, 6, 7, 5, 9, 2, 1}));
  CHECK(c.file_row0 == (std::vector<int64_t>{1050, 10}));
  CHECK(c.file_kept == (std::vector<int64_t>{6, 2}));
}

TEST(files_sharing_a_rank_are_merged_by_start_index_and_file) {
  const Facts facts;
  Rows a, b, c;
  a.add({.cat = 1, .index = 0, .ts = 5});
  a.add({.cat = 1, .index = 1, .ts = 20});
  b.add({.cat = 1, .index = 0, .ts = 10});
  b.add({.cat = 1, .index = 1, .ts = 5});
  c.add({.cat = 4, .index = 0, .ts = 3});  // dropped: its rank has no row
  const std::vector<FileIn> files = {a.file(0, 0), b.file(0, 0), c.file(2, 777)};
  for (bool links : {true, false}) {
    const RowsOut o = k::convert_rows(facts.tables(), files, facts.kind_order.data(), kMarkCat0,
                                      kMarkName, 2, links);
    const Columns got = columns(o);
    CHECK(got.start == (std::vector<int64_t>{5, 5, 5, 5, 10, 20, 777}));
    CHECK(got.cat == (std::vector<int32_t>{kMarkCat0, kMarkCat0 + 1, 1, 1, 1, 1, kMarkCat0 + 2}));
    CHECK(got.rank == (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 2}));
    CHECK(got.file_kept == (std::vector<int64_t>{2, 2, 0}));
    CHECK(got.file_row0 == (std::vector<int64_t>{5, 10, kNull}));
    if (links) {
      CHECK(got.index == (std::vector<int64_t>{-1, -1, 0, 1, 0, 1, -1}));
      CHECK(got.out_row == (std::vector<int64_t>{2, 5, 4, 3, -1}));
    } else {
      CHECK(o.index == nullptr);
      CHECK(o.out_row == nullptr);
    }
  }
}

TEST(no_files_and_empty_files) {
  const Facts facts;
  const RowsOut none =
      k::convert_rows(facts.tables(), {}, facts.kind_order.data(), kMarkCat0, kMarkName, 1, true);
  CHECK_EQ(none.rows, 0u);
  Rows empty;
  const RowsOut one = k::convert_rows(facts.tables(), {empty.file(3, 42)}, facts.kind_order.data(),
                                      kMarkCat0, kMarkName, 1, true);
  REQUIRE(one.rows == 1);
  CHECK_EQ(one.start[0], 42);
  CHECK_EQ(one.kind[0], u8(Kind::kMark));
}

// Random rows of many files, converted with 1, 2 and 4 threads, with and without the links:
// the same columns every time (the threads' paths: one file split in halves, files per thread).
TEST(threads_convert_what_one_thread_converts) {
  const Facts facts;
  std::mt19937_64 rng(2024);
  auto rows_of = [&](size_t n) {
    Rows r;
    for (size_t i = 0; i < n; ++i) {
      const auto cat = static_cast<int32_t>(rng() % 6);
      r.add({.cat = cat,
             .name = static_cast<int32_t>(rng() % 6) - 1,
             .index = static_cast<int64_t>(i),
             .ts = static_cast<int64_t>(rng() % 100000),  // many equal starts: ties by index
             .dur = static_cast<int64_t>(rng() % 50),
             .pid = static_cast<int64_t>(rng() % 4),
             .tid = static_cast<int64_t>(rng() % 8),
             .stream = rng() % 3 ? static_cast<int64_t>(rng() % 4) : kNull,
             .device = rng() % 2 ? 0 : kNull,
             .corr = rng() % 2 ? static_cast<int64_t>(i) : kNull,
             .bytes = static_cast<int64_t>(rng() % 1000) - 10,
             .ext = rng() % 2 ? static_cast<int64_t>(i) : kNull,
             .sync = rng() % 5 ? -1 : 0});
    }
    return r;
  };
  // One large file (above kPrefaultMin: the prefault helper runs), then four of a rank each.
  std::vector<Rows> one = {rows_of(k::kPrefaultMin + 5000)};
  std::vector<Rows> four = {rows_of(20000), rows_of(15000), rows_of(1), rows_of(12000)};
  for (const std::vector<Rows>* set : {&one, &four}) {
    std::vector<FileIn> files;
    for (size_t f = 0; f < set->size(); ++f) {
      files.push_back((*set)[f].file(static_cast<int32_t>(set->size() - f), 1000 * f));
    }
    for (bool links : {true, false}) {
      const Columns base = columns(k::convert_rows(facts.tables(), files, facts.kind_order.data(),
                                                   kMarkCat0, kMarkName, 1, links));
      for (int threads : {2, 4}) {
        const Columns got = columns(k::convert_rows(facts.tables(), files, facts.kind_order.data(),
                                                    kMarkCat0, kMarkName, threads, links));
        CHECK(got == base);
      }
      // Sorted by (rank, start) and every kept row present once.
      bool sorted = true;
      for (size_t i = 1; i < base.start.size(); ++i) {
        sorted =
            sorted && (base.rank[i - 1] < base.rank[i] ||
                       (base.rank[i - 1] == base.rank[i] && base.start[i - 1] <= base.start[i]));
      }
      CHECK(sorted);
    }
  }
}

TEST(codes_outside_their_tables_are_refused) {
  const Facts facts;
  for (Rows::Row bad :
       {Rows::Row{.cat = 6, .index = 0, .ts = 0}, Rows::Row{.cat = -1, .index = 0, .ts = 0},
        Rows::Row{.cat = 0, .name = 5, .index = 0, .ts = 0},
        Rows::Row{.cat = 0, .name = -2, .index = 0, .ts = 0}}) {
    Rows r;
    r.add({.cat = 1, .index = 0, .ts = 0});
    r.add(bad);
    CHECK_THROWS(k::convert_rows(facts.tables(), {r.file(0, 0)}, facts.kind_order.data(), kMarkCat0,
                                 kMarkName, 1, true),
                 std::out_of_range);
  }
  Facts step = facts;
  step.cat_kind[0] = u8(Kind::kStep);  // a step comes from the step rule alone
  Rows r;
  r.add({.cat = 1, .index = 0, .ts = 0});
  CHECK_THROWS(k::convert_rows(step.tables(), {r.file(0, 0)}, step.kind_order.data(), kMarkCat0,
                               kMarkName, 1, true),
               std::invalid_argument);
}

TEST(count_by_cat_counts_rows_and_rows_without_correlation) {
  const std::vector<int32_t> cat = {0, 2, 2, 1, 2};
  const std::vector<int64_t> corr = {5, kNull, 3, kNull, kNull};
  std::vector<int64_t> rows(3, -1), none(3, -1);
  k::count_by_cat(cat.data(), corr.data(), cat.size(), 3, rows.data(), none.data());
  CHECK(rows == (std::vector<int64_t>{1, 1, 3}));
  CHECK(none == (std::vector<int64_t>{0, 1, 2}));
  const std::vector<int32_t> bad = {0, 3};
  CHECK_THROWS(k::count_by_cat(bad.data(), corr.data(), 2, 3, rows.data(), none.data()),
               std::out_of_range);
  const std::vector<int32_t> negative = {-1};
  CHECK_THROWS(k::count_by_cat(negative.data(), corr.data(), 1, 3, rows.data(), none.data()),
               std::out_of_range);
}
