// The native importer's conversion (see row_convert.h): the rules are those of the general
// converter (_kineto/_convert.py), row for row.
#include "kineto/row_convert.h"

#include <algorithm>
#include <array>
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
// (event index order within a file). Appends the sorted positions to `order`. `scratch`: room
// for 2 x (hi - lo) items, borrowed from the output block (the passes write every item there
// before reading it).
struct Item {
  uint64_t key;  // start - the least start, ns
  uint32_t pos;
};

template <typename StartOf>
void sort_by_start(StartOf start_of, uint32_t lo, uint32_t hi, int64_t least, Item* scratch,
                   std::vector<uint32_t>* order) {
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
  for (size_t i = 0; i < n; ++i) order->push_back(a[i].pos);
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

// The general order's key of a row: `pos` a kept position (< kept), or the mark of file pos - kept.
struct Key {
  int32_t rank;
  int32_t file;
  int64_t start;
  int64_t index;
  uint32_t pos;
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

RowsOut convert_rows(const RowsIn& in, const Tables& t, const std::vector<FileIn>& files,
                     const uint8_t* kind_order, int32_t mark_cat0, int32_t mark_name, int threads,
                     bool links) {
  const size_t n = in.n, nf = files.size();
  if (n >= std::numeric_limits<uint32_t>::max()) {
    throw std::length_error("kineto convert: more than 2^32 rows in one import");
  }
  size_t sum = 0;
  for (const FileIn& file : files) sum += file.rows;
  if (sum != n) throw std::invalid_argument("kineto convert: file sizes do not add up to rows");
  constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
  // Kind step comes from the step rule alone (no category is of kind step): the output's
  // correlation of a step row is its step number.
  for (size_t c = 0; c < t.n_cat; ++c) {
    if (t.cat_kind[c] >= kNumKinds || t.cat_kind[c] == u8(Kind::kStep)) {
      throw std::invalid_argument("kineto convert: a category's kind is not a category kind");
    }
  }

  // Pass 1, input order: which rows are kept, their kind (the rest of the rules is applied
  // where the output is written: no column per rule in between).
  std::vector<uint32_t> kept_row;  // kept position -> its input row
  std::vector<uint8_t> kept_kind;
  kept_row.reserve(n);
  kept_kind.reserve(n);
  std::vector<int64_t> row0(nf, kNull), first(nf, kNull);  // first: the file's least start
  std::vector<uint32_t> file_lo(nf + 1, 0);  // kept positions of file f: [file_lo[f], file_lo[f+1])
  size_t row = 0;
  for (size_t f = 0; f < nf; ++f) {
    const FileIn& file = files[f];
    file_lo[f] = static_cast<uint32_t>(kept_row.size());
    for (size_t end = row + file.rows; row < end; ++row) {
      int32_t cat = in.cat[row], name = in.name[row] < 0 ? t.null_name : in.name[row];
      if (cat < 0 || static_cast<size_t>(cat) >= t.n_cat || name < 0 ||
          static_cast<size_t>(name) >= t.n_name || in.name[row] < -1) {
        throw std::out_of_range("kineto convert: string code outside its dictionary");
      }
      if (t.cat_drop[cat] != 0) continue;
      uint8_t kd = t.cat_kind[cat];
      if (t.name_step[name] != kNull && kd == u8(Kind::kRegion)) kd = u8(Kind::kStep);
      int64_t start = file.base_ns + in.ts[row];
      kept_row.push_back(static_cast<uint32_t>(row));
      kept_kind.push_back(kd);
      if (in.index[row] == 0) row0[f] = start;
      if (first[f] == kNull || start < first[f]) first[f] = start;
    }
  }
  const auto kept = static_cast<uint32_t>(kept_row.size());
  file_lo[nf] = kept;
  const size_t total = kept + nf;
  const uint32_t* r = kept_row.data();
  const uint8_t* kk = kept_kind.data();
  // The file of kept position p (files are few: a binary search of their first positions).
  auto file_of = [&file_lo, nf](uint32_t p) {
    return static_cast<size_t>(std::upper_bound(file_lo.begin(), file_lo.begin() + nf, p) -
                               file_lo.begin()) -
           1;
  };
  auto start_of = [&](uint32_t p) { return files[file_of(p)].base_ns + in.ts[r[p]]; };
  auto name_of = [&](uint32_t p) {  // checked in pass 1
    const int32_t name = in.name[r[p]];
    return name < 0 ? t.null_name : name;
  };

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

  RowsOut out;
  out.rows = total;
  static_assert(sizeof(Item) == 2 * sizeof(int64_t) && alignof(Item) <= alignof(int64_t));
  void* block = std::malloc(std::max<size_t>(total, 1) * 4 * sizeof(int64_t));
  if (block == nullptr) throw std::bad_alloc();
  out.wide = std::shared_ptr<void>(block, &std::free);
  auto* wide = static_cast<int64_t*>(block);
  // A page's first write is a page fault (about 1 µs on this project's VM; the V100 trace's
  // output takes 2 k). With two threads, a helper takes them while this one orders the rows: it
  // populates the block ahead of the sort's writes (the content stays the sort's), then sizes
  // the other columns. They are reserved here first: a thread's allocations come from a malloc
  // arena of its own (fresh pages, where this thread's reuse freed ones).
  std::unique_ptr<Helper> prefault;
  if (threads >= 2 && total >= kPrefaultMin) {
    auto cols = [&out, total, n, links](auto grow) {
      for (auto* col : {&out.rank, &out.pid, &out.lane, &out.cat, &out.name, &out.sync}) {
        grow(*col, total);
      }
      for (auto* col : {&out.kind, &out.category}) grow(*col, total);
      grow(out.device, total);
      grow(out.ext, total);
      if (links) {
        grow(out.kind_order, total);
        grow(out.index, total);
        grow(out.out_row, n);
      }
    };
    cols([](auto& col, size_t size) { col.reserve(size); });
    prefault = std::make_unique<Helper>([cols, block, total] {
      populate(block, total * 4 * sizeof(int64_t));
      cols([](auto& col, size_t size) { col.resize(size); });
    });
  }

  // The order: rank, start, event index (marks -1), file. With one file per rank (any import
  // that succeeds: two files of one rank are an error), that is the files in rank order, each
  // its mark first (it starts at the rank's first start, index -1) and then its rows by start,
  // ties in file order (event index order). Otherwise, one comparison sort of every key.
  std::vector<uint32_t> order;
  order.reserve(total);
  std::vector<size_t> by_rank(nf);
  for (size_t f = 0; f < nf; ++f) by_rank[f] = f;
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [&files](size_t a, size_t b) { return files[a].rank < files[b].rank; });
  bool one_per_rank = true;
  for (size_t i = 1; i < nf; ++i) {
    one_per_rank = one_per_rank && files[by_rank[i]].rank != files[by_rank[i - 1]].rank;
  }
  if (one_per_rank) {
    auto* scratch = static_cast<Item*>(block);  // 2 x kept items fit in 4 x total int64
    for (size_t f : by_rank) {
      order.push_back(kept + static_cast<uint32_t>(f));
      const int64_t base = files[f].base_ns;
      sort_by_start([&](uint32_t p) { return base + in.ts[r[p]]; }, file_lo[f], file_lo[f + 1],
                    first[f], scratch, &order);
    }
  } else {
    std::vector<Key> keys;
    keys.reserve(total);
    for (size_t f = 0; f < nf; ++f) {
      for (uint32_t p = file_lo[f]; p < file_lo[f + 1]; ++p) {
        keys.push_back(Key{files[f].rank, static_cast<int32_t>(f), files[f].base_ns + in.ts[r[p]],
                           in.index[r[p]], p});
      }
      keys.push_back(Key{files[f].rank, static_cast<int32_t>(f), mark_start[f], -1,
                         kept + static_cast<uint32_t>(f)});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.rank != b.rank) return a.rank < b.rank;
      if (a.start != b.start) return a.start < b.start;
      if (a.index != b.index) return a.index < b.index;
      return a.file < b.file;
    });
    for (const Key& key : keys) order.push_back(key.pos);
  }
  if (prefault) prefault->join();  // the columns are sized: each is written by one thread below
  out.start = wide;                // the sort's items are dead from here on
  out.end = wide + total;
  out.correlation = wide + 2 * total;
  out.bytes = wide + 3 * total;

  // Writes, one column at a time (each reads few source arrays: fewer cache misses than a row
  // at a time over every column), the rules applied per row. Marks: the values row_convert.h
  // names.
  const uint32_t* ord = order.data();
  auto fill = [ord, kept, total](auto* col, auto of_kept, auto of_mark) {
    for (size_t o = 0; o < total; ++o) {
      uint32_t p = ord[o];
      col[o] = p < kept ? of_kept(p) : of_mark(p - kept);
    }
  };
  auto gather = [&fill, total](auto& col, auto of_kept, auto of_mark) {
    col.resize(total);
    fill(col.data(), of_kept, of_mark);
  };
  auto is = [](auto v) { return [v](uint32_t) { return v; }; };
  auto gpu = [&](uint32_t p) { return t.kind_gpu[kk[p]] != 0; };
  auto marker = [&](uint32_t p) { return kk[p] == u8(Kind::kMarker); };
  // Two halves of the columns, about equal bytes; the second on a thread of its own.
  auto first_half = [&] {
    // Rank: each rank's rows follow its marks (they start at the rank's first start, index -1).
    out.rank.resize(total);
    int32_t rank = 0;
    for (size_t o = 0; o < total; ++o) {
      if (ord[o] >= kept) rank = files[ord[o] - kept].rank;
      out.rank[o] = rank;
    }
    fill(out.start, start_of, [&](uint32_t f) { return mark_start[f]; });
    for (size_t o = 0; o < total; ++o) {  // a mark ends where it starts
      out.end[o] = out.start[o] + (ord[o] < kept ? in.dur[r[ord[o]]] : 0);
    }
    if (links) gather(out.index, [&](uint32_t p) { return in.index[r[p]]; }, is(int64_t{-1}));
    gather(
        out.pid,
        [&](uint32_t p) { return static_cast<int32_t>(clip(in.pid[r[p]], kI32Min, kI32Max, 0)); },
        is(int32_t{0}));
    gather(
        out.lane,
        [&](uint32_t p) {
          int64_t raw = gpu(p) && in.stream[r[p]] != kNull ? in.stream[r[p]] : in.tid[r[p]];
          return static_cast<int32_t>(clip(raw, kI32Min, kI32Max, 0));
        },
        is(int32_t{0}));
    gather(
        out.cat, [&](uint32_t p) { return in.cat[r[p]]; },
        [&](uint32_t f) { return mark_cat0 + static_cast<int32_t>(f); });
  };
  auto second_half = [&] {
    gather(out.name, name_of, is(mark_name));
    gather(out.sync, [&](uint32_t p) { return in.sync[r[p]]; }, is(int32_t{-1}));
    gather(out.kind, [&](uint32_t p) { return kk[p]; }, is(u8(Kind::kMark)));
    if (links) {
      gather(
          out.kind_order, [&](uint32_t p) { return kind_order[kk[p]]; },
          is(kind_order[u8(Kind::kMark)]));
    }
    gather(
        out.category,
        [&](uint32_t p) {
          return gpu(p)      ? t.name_gpu_cat[name_of(p)]
                 : marker(p) ? u8(Category::kOther)
                             : u8(Category::kHost);
        },
        is(u8(Category::kHost)));
    gather(
        out.device,
        [&](uint32_t p) {
          const int64_t dev = in.device[r[p]] == kNull ? in.pid[r[p]] : in.device[r[p]];
          return static_cast<int16_t>(gpu(p) || marker(p) ? clip(dev, -1, 32767, -1) : -1);
        },
        is(int16_t{-1}));
    fill(
        out.correlation,
        [&](uint32_t p) {
          const uint8_t kd = kk[p];
          if (kd == u8(Kind::kStep)) return t.name_step[name_of(p)];  // not null (pass 1)
          const int64_t corr = in.correlation[r[p]];
          return (gpu(p) || kd == u8(Kind::kRuntime)) && corr != kNull ? corr : int64_t{0};
        },
        is(int64_t{0}));
    fill(
        out.bytes,
        [&](uint32_t p) {
          const uint8_t kd = kk[p];
          const int64_t b = in.bytes[r[p]];
          const bool copy = kd == u8(Kind::kMemcpy) || kd == u8(Kind::kMemset);
          return copy && b != kNull ? std::max<int64_t>(b, 0) : int64_t{0};
        },
        is(int64_t{0}));
    gather(out.ext, [&](uint32_t p) { return in.ext[r[p]]; }, is(kNull));
    if (links) {
      out.out_row.assign(n, -1);
      for (size_t o = 0; o < total; ++o) {
        if (ord[o] < kept) out.out_row[r[ord[o]]] = static_cast<int64_t>(o);
      }
    }
  };
  if (threads >= 2 && total >= kConvertThreadsMin) {
    Helper worker(second_half);  // joined as first_half's error unwinds, if it throws
    first_half();
    worker.join();
  } else {
    first_half();
    second_half();
  }
  out.file_row0 = std::move(row0);
  out.file_kept.resize(nf);
  for (size_t f = 0; f < nf; ++f) out.file_kept[f] = file_lo[f + 1] - file_lo[f];
  return out;
}

}  // namespace stallscope::kineto
