// The native importer's conversion (see row_convert.h): the rules are those of the general
// converter (io/kineto/_convert.py), row for row.
#include "kineto/row_convert.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include "core/event_record.h"
#include "kineto/populate.h"
#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

namespace {

constexpr auto u8(Kind k) { return static_cast<uint8_t>(k); }
constexpr auto u8(Category c) { return static_cast<uint8_t>(c); }

int64_t clip(int64_t v, int64_t lo, int64_t hi, int64_t if_null) {
  return v == kNull ? if_null : std::min(std::max(v, lo), hi);
}

// Stable LSD radix sort of the kept positions [lo, hi) by start (`least`: their least start),
// 11 bits a pass, passes only over the digits where the starts differ: ties keep their order
// (event index order within a file). Writes the sorted positions to out[0, hi - lo). `scratch`:
// room for 2 x (hi - lo) items (the passes write every item there before reading it).
struct Item {
  uint64_t key;  // start - the least start, ns
  uint32_t pos;
};

template <typename StartOf>
void sort_by_start(StartOf start_of, uint32_t lo, uint32_t hi, int64_t least, Item* scratch,
                   uint32_t* out) {
  const size_t n = hi - lo;
  if (n == 0) return;
  Item* a = scratch;
  Item* b = scratch + n;
  uint64_t any = 0;  // the bits that differ somewhere
  for (size_t i = 0; i < n; ++i) {
    // Unsigned difference: exact for any two int64 values.
    uint64_t key = static_cast<uint64_t>(start_of(lo + i)) - static_cast<uint64_t>(least);
    a[i] = Item{key, static_cast<uint32_t>(lo + i)};
    any |= key;
  }
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  std::array<size_t, kBuckets> count{};
  for (int shift = 0; shift < 64 && (any >> shift) != 0; shift += kBits) {
    count.fill(0);
    for (size_t i = 0; i < n; ++i) ++count[(a[i].key >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t& c : count) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) b[count[(a[i].key >> shift) & (kBuckets - 1)]++] = a[i];
    std::swap(a, b);
  }
  for (size_t i = 0; i < n; ++i) out[i] = a[i].pos;
}

// Runs `work` on a thread of its own until join(); an exception it throws is rethrown by
// join(). Joined on destruction too (the caller's own error unwinding past it; the helper's
// error, if any, is then dropped).
class Helper {
 public:
  template <typename F>
  explicit Helper(F work)
      : thread_([this, work] {
          try {
            work();
          } catch (...) {
            failed_ = std::current_exception();
          }
        }) {}
  ~Helper() {
    if (thread_.joinable()) thread_.join();
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  void join() {
    thread_.join();
    if (failed_) std::rethrow_exception(failed_);
  }

 private:
  std::exception_ptr failed_;
  std::thread thread_;
};

// task(i, worker) for every i in [0, tasks), on `workers` threads (this one is worker 0), each
// taking the next task when it is done with one. After an error no task is started; the first
// error is rethrown once every thread has stopped.
template <typename F>
void run_tasks(size_t workers, size_t tasks, F task) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto loop = [&](size_t worker) {
    try {
      for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next++) < tasks;) {
        task(i, worker);
      }
    } catch (...) {
      failed = true;
      throw;
    }
  };
  std::vector<std::unique_ptr<Helper>> helpers;
  for (size_t w = 1; w < std::min(workers, tasks); ++w) {
    helpers.push_back(std::make_unique<Helper>([&loop, w] { loop(w); }));
  }
  std::exception_ptr error;
  try {
    loop(0);
  } catch (...) {
    error = std::current_exception();
  }
  for (auto& h : helpers) {
    try {
      h->join();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Offsets of columns in one malloc'd block, each on a 64-byte boundary.
struct Layout {
  size_t bytes = 0;
  size_t add(size_t size) {
    const size_t at = bytes;
    bytes += (size + 63) & ~size_t{63};
    return at;
  }
};

std::shared_ptr<void> block_of(size_t bytes) {
  void* p = std::malloc(std::max<size_t>(bytes, 64));
  if (p == nullptr) throw std::bad_alloc();
  return {p, &std::free};
}

// The general order's key of a row: `pos` a kept position (< n), or the mark of file pos - n.
struct Key {
  int32_t rank;
  int32_t file;
  int64_t start;
  int64_t index;
  uint32_t pos;
};

// Output rows [lo, hi), all of file f: its mark and its rows, or (files sharing a rank) a run
// of them.
struct Segment {
  size_t f, lo, hi;
};

}  // namespace

void count_by_cat(const int32_t* cat, const int64_t* correlation, size_t n, size_t n_cat,
                  int64_t* rows, int64_t* no_correlation) {
  std::fill(rows, rows + n_cat, 0);
  std::fill(no_correlation, no_correlation + n_cat, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<size_t>(cat[i]);  // a negative code wraps past n_cat
    if (c >= n_cat) throw std::out_of_range("kineto cat counts: a cat code outside its table");
    ++rows[c];
    no_correlation[c] += correlation[i] == kNull;
  }
}

RowsOut convert_rows(const Tables& t, const std::vector<FileIn>& files, const uint8_t* kind_order,
                     int32_t mark_cat0, int32_t mark_name, int threads, bool links) {
  const size_t nf = files.size();
  // Input rows: file f's are [row_lo[f], row_lo[f + 1]) (file order, as out_row counts them).
  std::vector<size_t> row_lo(nf + 1, 0);
  for (size_t f = 0; f < nf; ++f) row_lo[f + 1] = row_lo[f] + files[f].rows.n;
  const size_t n = row_lo[nf];
  if (n + nf >= std::numeric_limits<uint32_t>::max()) {
    throw std::length_error("kineto convert: more than 2^32 rows in one import");
  }
  constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
  // Kind step comes from the step rule alone (no category is of kind step): the output's
  // correlation of a step row is its step number.
  for (size_t c = 0; c < t.n_cat; ++c) {
    if (t.cat_kind[c] >= kNumKinds || t.cat_kind[c] == u8(Kind::kStep)) {
      throw std::invalid_argument("kineto convert: a category's kind is not a category kind");
    }
  }
  std::vector<size_t> by_rank(nf);
  for (size_t f = 0; f < nf; ++f) by_rank[f] = f;
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [&files](size_t a, size_t b) { return files[a].rank < files[b].rank; });
  bool one_per_rank = true;
  for (size_t i = 1; i < nf; ++i) {
    one_per_rank = one_per_rank && files[by_rank[i]].rank != files[by_rank[i - 1]].rank;
  }
  // Several files of a rank each, enough rows and threads: each thread converts whole files.
  const bool per_file = one_per_rank && nf >= 2 && threads >= 2 && n >= kConvertThreadsMin;
  const size_t workers = per_file ? std::min(static_cast<size_t>(threads), nf) : 1;

  // The output's columns, sized for every row kept (rows + marks: at most n + nf; the rows of
  // dropped categories leave a tail never written, hence never faulted in).
  const size_t cap = n + nf;
  RowsOut out;
  out.inputs = n;
  Layout fl, wl;
  const size_t at_start = fl.add(cap * 8), at_end = fl.add(cap * 8), at_corr = fl.add(cap * 8),
               at_bytes = fl.add(cap * 8), at_rank = fl.add(cap * 4), at_pid = fl.add(cap * 4),
               at_lane = fl.add(cap * 4), at_name = fl.add(cap * 4), at_device = fl.add(cap * 2),
               at_kind = fl.add(cap), at_category = fl.add(cap);
  const size_t at_ext = wl.add(cap * 8), at_cat = wl.add(cap * 4), at_sync = wl.add(cap * 4);
  const size_t at_index = links ? wl.add(cap * 8) : 0, at_out_row = links ? wl.add(n * 8) : 0,
               at_kind_order = links ? wl.add(cap) : 0;
  out.frame = block_of(fl.bytes);
  out.work = block_of(wl.bytes);
  auto* fb = static_cast<uint8_t*>(out.frame.get());
  auto* wb = static_cast<uint8_t*>(out.work.get());
  out.start = reinterpret_cast<int64_t*>(fb + at_start);
  out.end = reinterpret_cast<int64_t*>(fb + at_end);
  out.correlation = reinterpret_cast<int64_t*>(fb + at_corr);
  out.bytes = reinterpret_cast<int64_t*>(fb + at_bytes);
  out.rank = reinterpret_cast<int32_t*>(fb + at_rank);
  out.pid = reinterpret_cast<int32_t*>(fb + at_pid);
  out.lane = reinterpret_cast<int32_t*>(fb + at_lane);
  out.name = reinterpret_cast<int32_t*>(fb + at_name);
  out.device = reinterpret_cast<int16_t*>(fb + at_device);
  out.kind = fb + at_kind;
  out.category = fb + at_category;
  out.ext = reinterpret_cast<int64_t*>(wb + at_ext);
  out.cat = reinterpret_cast<int32_t*>(wb + at_cat);
  out.sync = reinterpret_cast<int32_t*>(wb + at_sync);
  if (links) {
    out.index = reinterpret_cast<int64_t*>(wb + at_index);
    out.out_row = reinterpret_cast<int64_t*>(wb + at_out_row);
    out.kind_order = wb + at_kind_order;
  }
  // Selection, in input order: which rows are kept, their kind (the rest of the rules is
  // applied where the output is written: no column per rule in between). Kept position p < n:
  // file f's kept rows are [row_lo[f], row_lo[f] + kept_n[f]), r[p] the row in its file; the
  // mark of file f is position n + f.
  std::unique_ptr<uint32_t[]> r_owner(new uint32_t[std::max<size_t>(n, 1)]);
  std::unique_ptr<uint8_t[]> kk_owner(new uint8_t[std::max<size_t>(n, 1)]);
  uint32_t* const r = r_owner.get();
  uint8_t* const kk = kk_owner.get();
  std::vector<int64_t> row0(nf, kNull), first(nf, kNull);  // first: the file's least start
  std::vector<uint32_t> kept_n(nf, 0);
  auto select = [&](size_t f) {
    const RowsIn& in = files[f].rows;
    const int64_t base = files[f].base_ns;
    auto w = static_cast<uint32_t>(row_lo[f]);
    for (size_t i = 0; i < in.n; ++i) {
      int32_t cat = in.cat[i], name = in.name[i] < 0 ? t.null_name : in.name[i];
      if (cat < 0 || static_cast<size_t>(cat) >= t.n_cat || name < 0 ||
          static_cast<size_t>(name) >= t.n_name || in.name[i] < -1) {
        throw std::out_of_range("kineto convert: string code outside its dictionary");
      }
      if (t.cat_drop[cat] != 0) continue;
      uint8_t kd = t.cat_kind[cat];
      if (t.name_step[name] != kNull && kd == u8(Kind::kRegion)) kd = u8(Kind::kStep);
      const int64_t start = base + in.ts[i];
      r[w] = static_cast<uint32_t>(i);
      kk[w] = kd;
      ++w;
      if (in.index[i] == 0) row0[f] = start;
      if (first[f] == kNull || start < first[f]) first[f] = start;
    }
    kept_n[f] = w - static_cast<uint32_t>(row_lo[f]);
    if (links) std::fill(out.out_row + row_lo[f], out.out_row + row_lo[f + 1], -1);
  };
  // Files largest first, for the threads' balance.
  std::vector<size_t> by_size(nf);
  for (size_t f = 0; f < nf; ++f) by_size[f] = f;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&files](size_t a, size_t b) { return files[a].rows.n > files[b].rows.n; });
  if (per_file) {
    run_tasks(workers, nf, [&](size_t i, size_t) { select(by_size[i]); });
  } else {
    for (size_t f = 0; f < nf; ++f) select(f);
  }
  // A page's first write is a page fault (about 1 µs on this project's VM; the V100 trace's
  // output takes 2 k). Converting one file's columns with two threads, a helper takes them
  // while this one orders the rows: it populates the blocks ahead of the writes
  // (the content stays the writers'). Converting whole files per thread, each thread faults in
  // its own files' rows.
  std::unique_ptr<Helper> prefault;
  if (!per_file && threads >= 2 && cap >= kPrefaultMin) {
    prefault = std::make_unique<Helper>([fb, fbytes = fl.bytes, wb, wbytes = wl.bytes] {
      populate(fb, fbytes);
      populate(wb, wbytes);
    });
  }

  size_t kept = 0;
  for (size_t f = 0; f < nf; ++f) kept += kept_n[f];
  const size_t total = kept + nf;
  out.rows = total;

  // Marks: start at the first start of the rank (over its files), else at the file's base.
  std::vector<int64_t> mark_start(nf);
  for (size_t f = 0; f < nf; ++f) {
    int64_t s = kNull;
    for (size_t g = 0; g < nf; ++g) {
      if (files[g].rank == files[f].rank && first[g] != kNull && (s == kNull || first[g] < s)) {
        s = first[g];
      }
    }
    mark_start[f] = s == kNull ? files[f].base_ns : s;
  }

  // Writes, one column at a time over a segment (each reads few source arrays: fewer cache
  // misses than a row at a time over every column), the rules applied per row. Marks: the
  // values row_convert.h names.
  std::unique_ptr<uint32_t[]> order_owner(new uint32_t[std::max<size_t>(total, 1)]);
  uint32_t* const ord = order_owner.get();
  auto fill = [ord, n, &files](const Segment& s, auto* col, auto of_kept, auto of_mark) {
    const FileIn& file = files[s.f];
    for (size_t o = s.lo; o < s.hi; ++o) {
      const uint32_t p = ord[o];
      col[o] = p < n ? of_kept(file, p) : of_mark(p - n);
    }
  };
  auto is = [](auto v) { return [v](uint32_t) { return v; }; };
  auto gpu = [&](uint32_t p) { return t.kind_gpu[kk[p]] != 0; };
  auto marker = [&](uint32_t p) { return kk[p] == u8(Kind::kMarker); };
  auto name_of = [&](const FileIn& file, uint32_t p) {  // checked by select
    const int32_t name = file.rows.name[r[p]];
    return name < 0 ? t.null_name : name;
  };
  // Two halves of the columns, about equal bytes (one file converted by two threads: a half
  // each).
  auto first_half = [&](const Segment& s) {
    std::fill(out.rank + s.lo, out.rank + s.hi, files[s.f].rank);
    fill(
        s, out.start,
        [&](const FileIn& file, uint32_t p) { return file.base_ns + file.rows.ts[r[p]]; },
        [&](uint32_t f) { return mark_start[f]; });
    const int64_t* dur = files[s.f].rows.dur;
    for (size_t o = s.lo; o < s.hi; ++o) {  // a mark ends where it starts
      out.end[o] = out.start[o] + (ord[o] < n ? dur[r[ord[o]]] : 0);
    }
    if (links) {
      fill(
          s, out.index, [&](const FileIn& file, uint32_t p) { return file.rows.index[r[p]]; },
          is(int64_t{-1}));
    }
    fill(
        s, out.pid,
        [&](const FileIn& file, uint32_t p) {
          return static_cast<int32_t>(clip(file.rows.pid[r[p]], kI32Min, kI32Max, 0));
        },
        is(int32_t{0}));
    fill(
        s, out.lane,
        [&](const FileIn& file, uint32_t p) {
          const RowsIn& in = file.rows;
          int64_t raw = gpu(p) && in.stream[r[p]] != kNull ? in.stream[r[p]] : in.tid[r[p]];
          return static_cast<int32_t>(clip(raw, kI32Min, kI32Max, 0));
        },
        is(int32_t{0}));
    fill(
        s, out.cat, [&](const FileIn& file, uint32_t p) { return file.rows.cat[r[p]]; },
        [&](uint32_t f) { return mark_cat0 + static_cast<int32_t>(f); });
  };
  auto second_half = [&](const Segment& s) {
    fill(s, out.name, name_of, is(mark_name));
    fill(
        s, out.sync, [&](const FileIn& file, uint32_t p) { return file.rows.sync[r[p]]; },
        is(int32_t{-1}));
    fill(s, out.kind, [&](const FileIn&, uint32_t p) { return kk[p]; }, is(u8(Kind::kMark)));
    if (links) {
      fill(
          s, out.kind_order, [&](const FileIn&, uint32_t p) { return kind_order[kk[p]]; },
          is(kind_order[u8(Kind::kMark)]));
    }
    fill(
        s, out.category,
        [&](const FileIn& file, uint32_t p) {
          return gpu(p)      ? t.name_gpu_cat[name_of(file, p)]
                 : marker(p) ? u8(Category::kOther)
                             : u8(Category::kHost);
        },
        is(u8(Category::kHost)));
    fill(
        s, out.device,
        [&](const FileIn& file, uint32_t p) {
          const RowsIn& in = file.rows;
          const int64_t dev = in.device[r[p]] == kNull ? in.pid[r[p]] : in.device[r[p]];
          return static_cast<int16_t>(gpu(p) || marker(p) ? clip(dev, -1, 32767, -1) : -1);
        },
        is(int16_t{-1}));
    fill(
        s, out.correlation,
        [&](const FileIn& file, uint32_t p) {
          const uint8_t kd = kk[p];
          if (kd == u8(Kind::kStep)) return t.name_step[name_of(file, p)];  // not null (select)
          const int64_t corr = file.rows.correlation[r[p]];
          return (gpu(p) || kd == u8(Kind::kRuntime)) && corr != kNull ? corr : int64_t{0};
        },
        is(int64_t{0}));
    fill(
        s, out.bytes,
        [&](const FileIn& file, uint32_t p) {
          const uint8_t kd = kk[p];
          const int64_t b = file.rows.bytes[r[p]];
          const bool copy = kd == u8(Kind::kMemcpy) || kd == u8(Kind::kMemset);
          return copy && b != kNull ? std::max<int64_t>(b, 0) : int64_t{0};
        },
        is(int64_t{0}));
    fill(
        s, out.ext, [&](const FileIn& file, uint32_t p) { return file.rows.ext[r[p]]; }, is(kNull));
    if (links) {
      int64_t* to = out.out_row + row_lo[s.f];
      for (size_t o = s.lo; o < s.hi; ++o) {
        if (ord[o] < n) to[r[ord[o]]] = static_cast<int64_t>(o);
      }
    }
  };

  // The order: rank, start, event index (marks -1), file. With one file per rank (any import
  // that succeeds: two files of one rank are an error), that is the files in rank order, each
  // its mark first (it starts at the rank's first start, index -1) and then its rows by start,
  // ties in file order (event index order): a segment per file. Otherwise, one comparison sort
  // of every key, and a segment per run of one file's rows.
  std::vector<Segment> segments;
  if (one_per_rank) {
    std::vector<size_t> out_lo(nf);
    size_t o = 0;
    for (size_t f : by_rank) {
      out_lo[f] = o;
      segments.push_back(Segment{f, o, o + 1 + kept_n[f]});
      o += 1 + kept_n[f];
    }
    // The rows of file f by start, after its mark; `scratch`: room for 2 x its kept rows.
    auto order_file = [&](size_t f, Item* scratch) {
      const size_t lo = out_lo[f];
      ord[lo] = static_cast<uint32_t>(n + f);
      const FileIn& file = files[f];
      const auto p0 = static_cast<uint32_t>(row_lo[f]);
      sort_by_start([&](uint32_t p) { return file.base_ns + file.rows.ts[r[p]]; }, p0,
                    p0 + kept_n[f], first[f], scratch, ord + lo + 1);
    };
    if (per_file) {
      // Each thread: whole files (order and every column), its sort's room its own.
      uint32_t most = 0;
      for (uint32_t k : kept_n) most = std::max(most, k);
      std::vector<std::unique_ptr<Item[]>> room(workers);
      run_tasks(workers, nf, [&](size_t i, size_t w) {
        const size_t f = by_size[i];
        if (!room[w]) room[w].reset(new Item[2 * static_cast<size_t>(std::max<uint32_t>(most, 1))]);
        order_file(f, room[w].get());
        const Segment s{f, out_lo[f], out_lo[f] + 1 + kept_n[f]};
        first_half(s);
        second_half(s);
      });
    } else {
      // The sort's items borrow the four int64 columns' pages (2 x kept items fit in 4 x cap
      // int64), dead once the order is made.
      static_assert(sizeof(Item) == 2 * sizeof(int64_t) && alignof(Item) <= 16);
      auto* scratch = reinterpret_cast<Item*>(fb + at_start);
      for (size_t f : by_rank) order_file(f, scratch);
    }
  } else {
    std::vector<Key> keys;
    keys.reserve(total);
    for (size_t f = 0; f < nf; ++f) {
      const RowsIn& in = files[f].rows;
      for (auto p = static_cast<uint32_t>(row_lo[f]); p < row_lo[f] + kept_n[f]; ++p) {
        keys.push_back(Key{files[f].rank, static_cast<int32_t>(f), files[f].base_ns + in.ts[r[p]],
                           in.index[r[p]], p});
      }
      keys.push_back(Key{files[f].rank, static_cast<int32_t>(f), mark_start[f], -1,
                         static_cast<uint32_t>(n + f)});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.rank != b.rank) return a.rank < b.rank;
      if (a.start != b.start) return a.start < b.start;
      if (a.index != b.index) return a.index < b.index;
      return a.file < b.file;
    });
    for (size_t o = 0; o < total; ++o) {
      const auto f = static_cast<size_t>(keys[o].file);
      ord[o] = keys[o].pos;
      if (segments.empty() || segments.back().f != f) segments.push_back(Segment{f, o, o});
      segments.back().hi = o + 1;
    }
  }
  if (prefault) prefault->join();
  if (!per_file) {
    auto halves = [&segments](auto half) {
      return [&segments, half] {
        for (const Segment& s : segments) half(s);
      };
    };
    if (threads >= 2 && total >= kConvertThreadsMin) {
      Helper worker(halves(second_half));  // joined as first_half's error unwinds, if it throws
      halves(first_half)();
      worker.join();
    } else {
      halves(first_half)();
      halves(second_half)();
    }
  }
  out.file_row0 = std::move(row0);
  out.file_kept.assign(kept_n.begin(), kept_n.end());
  return out;
}

}  // namespace stallscope::kineto
