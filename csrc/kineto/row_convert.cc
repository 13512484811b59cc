// The native importer's conversion (see row_convert.h): the rules are those of the general
// converter (_kineto/_convert.py), row for row.
#include "kineto/row_convert.h"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/event_record.h"
#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

namespace {

constexpr auto u8(Kind k) { return static_cast<uint8_t>(k); }
constexpr auto u8(Category c) { return static_cast<uint8_t>(c); }

int64_t clip(int64_t v, int64_t lo, int64_t hi, int64_t if_null) {
  return v == kNull ? if_null : std::min(std::max(v, lo), hi);
}

// Per kept row (in input order, dropped rows left out): the values the rules compute, and the
// input row the rest is read from.
struct Kept {
  std::vector<uint32_t> row;  // its input row
  std::vector<uint8_t> kind, category;
  std::vector<int64_t> start, correlation, bytes;
  std::vector<int32_t> lane;
  std::vector<int16_t> device;
};

// Stable LSD radix sort of the positions [lo, hi) of `start` by start (`least`: their least
// start), 11 bits a pass, passes only over the digits where the starts differ: ties keep their
// order (event index order within a file). Appends the sorted positions to `order`.
void sort_by_start(const std::vector<int64_t>& start, uint32_t lo, uint32_t hi, int64_t least,
                   std::vector<uint32_t>* order) {
  struct Item {
    uint64_t key;  // start - the least start, ns
    uint32_t pos;
  };
  const size_t n = hi - lo;
  if (n == 0) return;
  std::vector<Item> a(n), b(n);
  uint64_t any = 0;  // the bits that differ somewhere
  for (size_t i = 0; i < n; ++i) {
    // Unsigned difference: exact for any two int64 values.
    uint64_t key = static_cast<uint64_t>(start[lo + i]) - static_cast<uint64_t>(least);
    a[i] = Item{key, static_cast<uint32_t>(lo + i)};
    any |= key;
  }
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  std::array<size_t, kBuckets> count{};
  for (int shift = 0; shift < 64 && (any >> shift) != 0; shift += kBits) {
    count.fill(0);
    for (const Item& it : a) ++count[(it.key >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t& c : count) sum += std::exchange(c, sum);
    for (const Item& it : a) b[count[(it.key >> shift) & (kBuckets - 1)]++] = it;
    a.swap(b);
  }
  for (const Item& it : a) order->push_back(it.pos);
}

// The general order's key of a row: `pos` a kept position (< kept), or the mark of file pos - kept.
struct Key {
  int32_t rank;
  int32_t file;
  int64_t start;
  int64_t index;
  uint32_t pos;
};

}  // namespace

RowsOut convert_rows(const RowsIn& in, const Tables& t, const std::vector<FileIn>& files,
                     const uint8_t* kind_order, int32_t mark_cat0, int32_t mark_name) {
  const size_t n = in.n, nf = files.size();
  if (n >= std::numeric_limits<uint32_t>::max()) {
    throw std::length_error("kineto convert: more than 2^32 rows in one import");
  }
  size_t sum = 0;
  for (const FileIn& file : files) sum += file.rows;
  if (sum != n) throw std::invalid_argument("kineto convert: file sizes do not add up to rows");
  constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

  // Pass 1, input order: the rules, for the kept rows.
  Kept k;
  auto reserve_all = [n](auto&... v) { (v.reserve(n), ...); };
  reserve_all(k.row, k.kind, k.category, k.start, k.correlation, k.bytes, k.lane, k.device);
  std::vector<int64_t> row0(nf, kNull), first(nf, kNull);  // first: the file's least start
  std::vector<uint32_t> file_lo(nf + 1, 0);  // kept positions of file f: [file_lo[f], file_lo[f+1])
  size_t row = 0;
  for (size_t f = 0; f < nf; ++f) {
    const FileIn& file = files[f];
    file_lo[f] = static_cast<uint32_t>(k.row.size());
    for (size_t end = row + file.rows; row < end; ++row) {
      int32_t cat = in.cat[row], name = in.name[row];
      if (cat < 0 || static_cast<size_t>(cat) >= t.n_cat || name < 0 ||
          static_cast<size_t>(name) >= t.n_name) {
        throw std::out_of_range("kineto convert: string code outside its dictionary");
      }
      if (t.cat_drop[cat] != 0) continue;
      uint8_t kd = t.cat_kind[cat];
      int64_t step = t.name_step[name];
      bool is_step = step != kNull && kd == u8(Kind::kRegion);
      if (is_step) kd = u8(Kind::kStep);
      bool gpu = t.kind_gpu[kd] != 0;
      bool marker = kd == u8(Kind::kMarker);
      int64_t start = file.base_ns + in.ts[row];
      int64_t corr = in.correlation[row];
      bool linked = gpu || kd == u8(Kind::kRuntime);
      bool copy = kd == u8(Kind::kMemcpy) || kd == u8(Kind::kMemset);
      int64_t lane_raw = gpu && in.stream[row] != kNull ? in.stream[row] : in.tid[row];
      int64_t dev_raw = in.device[row] == kNull ? in.pid[row] : in.device[row];
      k.row.push_back(static_cast<uint32_t>(row));
      k.kind.push_back(kd);
      k.category.push_back(gpu      ? t.name_gpu_cat[name]
                           : marker ? u8(Category::kOther)
                                    : u8(Category::kHost));
      k.start.push_back(start);
      k.correlation.push_back(is_step ? step : (linked && corr != kNull ? corr : 0));
      k.bytes.push_back(copy && in.bytes[row] != kNull ? std::max<int64_t>(in.bytes[row], 0) : 0);
      k.lane.push_back(static_cast<int32_t>(clip(lane_raw, kI32Min, kI32Max, 0)));
      k.device.push_back(static_cast<int16_t>(gpu || marker ? clip(dev_raw, -1, 32767, -1) : -1));
      if (in.index[row] == 0) row0[f] = start;
      if (first[f] == kNull || start < first[f]) first[f] = start;
    }
  }
  const auto kept = static_cast<uint32_t>(k.row.size());
  file_lo[nf] = kept;
  const size_t total = kept + nf;

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
    for (size_t f : by_rank) {
      order.push_back(kept + static_cast<uint32_t>(f));
      sort_by_start(k.start, file_lo[f], file_lo[f + 1], first[f], &order);
    }
  } else {
    std::vector<Key> keys;
    keys.reserve(total);
    for (size_t f = 0; f < nf; ++f) {
      for (uint32_t p = file_lo[f]; p < file_lo[f + 1]; ++p) {
        keys.push_back(
            Key{files[f].rank, static_cast<int32_t>(f), k.start[p], in.index[k.row[p]], p});
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

  // Gathers, one column at a time (each reads one source array: fewer cache misses than a
  // row at a time over every column). Marks: the values row_convert.h names.
  RowsOut out;
  auto gather = [&order, kept, total](auto& col, auto of_kept, auto of_mark) {
    col.resize(total);
    for (size_t o = 0; o < total; ++o) {
      uint32_t p = order[o];
      col[o] = p < kept ? of_kept(p) : of_mark(p - kept);
    }
  };
  const uint32_t* r = k.row.data();
  auto is = [](auto v) { return [v](uint32_t) { return v; }; };
  // Rank: each rank's rows follow its marks (they start at the rank's first start, index -1).
  out.rank.resize(total);
  int32_t rank = 0;
  for (size_t o = 0; o < total; ++o) {
    if (order[o] >= kept) rank = files[order[o] - kept].rank;
    out.rank[o] = rank;
  }
  gather(
      out.start, [&](uint32_t p) { return k.start[p]; }, [&](uint32_t f) { return mark_start[f]; });
  gather(
      out.end, [&](uint32_t p) { return k.start[p] + in.dur[r[p]]; },
      [&](uint32_t f) { return mark_start[f]; });
  gather(out.index, [&](uint32_t p) { return in.index[r[p]]; }, is(int64_t{-1}));
  gather(
      out.pid,
      [&](uint32_t p) { return static_cast<int32_t>(clip(in.pid[r[p]], kI32Min, kI32Max, 0)); },
      is(int32_t{0}));
  gather(out.lane, [&](uint32_t p) { return k.lane[p]; }, is(int32_t{0}));
  gather(
      out.cat, [&](uint32_t p) { return in.cat[r[p]]; },
      [&](uint32_t f) { return mark_cat0 + static_cast<int32_t>(f); });
  gather(out.name, [&](uint32_t p) { return in.name[r[p]]; }, is(mark_name));
  gather(out.sync, [&](uint32_t p) { return in.sync[r[p]]; }, is(int32_t{-1}));
  gather(out.kind, [&](uint32_t p) { return k.kind[p]; }, is(u8(Kind::kMark)));
  gather(
      out.kind_order, [&](uint32_t p) { return kind_order[k.kind[p]]; },
      is(kind_order[u8(Kind::kMark)]));
  gather(out.category, [&](uint32_t p) { return k.category[p]; }, is(u8(Category::kHost)));
  gather(out.device, [&](uint32_t p) { return k.device[p]; }, is(int16_t{-1}));
  gather(out.correlation, [&](uint32_t p) { return k.correlation[p]; }, is(int64_t{0}));
  gather(out.bytes, [&](uint32_t p) { return k.bytes[p]; }, is(int64_t{0}));
  gather(out.ext, [&](uint32_t p) { return in.ext[r[p]]; }, is(kNull));
  out.out_row.assign(n, -1);
  for (size_t o = 0; o < total; ++o) {
    if (order[o] < kept) out.out_row[r[order[o]]] = static_cast<int64_t>(o);
  }
  out.file_row0 = std::move(row0);
  out.file_kept.resize(nf);
  for (size_t f = 0; f < nf; ++f) out.file_kept[f] = file_lo[f + 1] - file_lo[f];
  return out;
}

}  // namespace stallscope::kineto
