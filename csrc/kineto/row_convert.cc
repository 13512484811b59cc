// The native importer's conversion (see row_convert.h): the rules are those of the general
// converter (_kineto/_convert.py), row for row.
#include "kineto/row_convert.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/event_record.h"
#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

namespace {

constexpr auto u8(Kind k) { return static_cast<uint8_t>(k); }
constexpr auto u8(Category c) { return static_cast<uint8_t>(c); }

int64_t clip(int64_t v, int64_t lo, int64_t hi, int64_t if_null) {
  return v == kNull ? if_null : std::min(std::max(v, lo), hi);
}

// One output row's sort key and where its values come from (row < n: an input row; else the
// mark of file row - n).
struct Key {
  int32_t rank;
  int32_t file;
  int64_t start;
  int64_t index;
  size_t row;
};

}  // namespace

RowsOut convert_rows(const RowsIn& in, const Tables& t, const std::vector<FileIn>& files,
                     const uint8_t* kind_order, int32_t mark_cat0, int32_t mark_name) {
  const size_t n = in.n, nf = files.size();
  constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

  // Per-row values in input order (the sort then gathers them once).
  std::vector<uint8_t> kind(n), category(n);
  std::vector<int64_t> start(n), correlation(n), bytes(n), lane(n), device(n);
  std::vector<Key> keys;  // the kept rows', then the marks'
  keys.reserve(n + nf);
  std::vector<int64_t> row0(nf, kNull), kept_by_file(nf, 0);
  size_t row = 0;
  for (size_t f = 0; f < nf; ++f) {
    const FileIn& file = files[f];
    for (size_t end = row + file.rows; row < end; ++row) {
      int32_t cat = in.cat[row], name = in.name[row];
      if (cat < 0 || static_cast<size_t>(cat) >= t.n_cat || name < 0 ||
          static_cast<size_t>(name) >= t.n_name) {
        throw std::out_of_range("kineto convert: string code outside its dictionary");
      }
      if (t.cat_drop[cat] != 0) continue;
      uint8_t k = t.cat_kind[cat];
      int64_t step = t.name_step[name];
      bool is_step = step != kNull && k == u8(Kind::kRegion);
      if (is_step) k = u8(Kind::kStep);
      bool gpu = t.kind_gpu[k] != 0;
      bool marker = k == u8(Kind::kMarker);
      kind[row] = k;
      category[row] = gpu      ? t.name_gpu_cat[name]
                      : marker ? u8(Category::kOther)
                               : u8(Category::kHost);
      start[row] = file.base_ns + in.ts[row];
      int64_t corr = in.correlation[row];
      bool linked = gpu || k == u8(Kind::kRuntime);
      correlation[row] = is_step ? step : (linked && corr != kNull ? corr : 0);
      bool copy = k == u8(Kind::kMemcpy) || k == u8(Kind::kMemset);
      bytes[row] = copy && in.bytes[row] != kNull ? std::max<int64_t>(in.bytes[row], 0) : 0;
      int64_t lane_raw = gpu && in.stream[row] != kNull ? in.stream[row] : in.tid[row];
      lane[row] = clip(lane_raw, kI32Min, kI32Max, 0);
      int64_t dev_raw = in.device[row] == kNull ? in.pid[row] : in.device[row];
      device[row] = gpu || marker ? clip(dev_raw, -1, 32767, -1) : -1;
      if (in.index[row] == 0) row0[f] = start[row];
      keys.push_back(Key{file.rank, static_cast<int32_t>(f), start[row], in.index[row], row});
      ++kept_by_file[f];
    }
  }
  if (row != n) throw std::invalid_argument("kineto convert: file sizes do not add up to rows");
  const size_t kept = keys.size(), total = kept + nf;

  // Marks: the first start of the rank (over its files), else the file's base.
  std::vector<int64_t> first(nf, kNull);
  for (size_t i = 0; i < kept; ++i) {
    size_t f = static_cast<size_t>(keys[i].file);
    if (first[f] == kNull || keys[i].start < first[f]) first[f] = keys[i].start;
  }
  for (size_t f = 0; f < nf; ++f) {
    int64_t s = kNull;
    for (size_t g = 0; g < nf; ++g) {
      if (files[g].rank == files[f].rank && first[g] != kNull && (s == kNull || first[g] < s)) {
        s = first[g];
      }
    }
    if (s == kNull) s = files[f].base_ns;
    keys.push_back(Key{files[f].rank, static_cast<int32_t>(f), s, -1, n + f});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.start != b.start) return a.start < b.start;
    if (a.index != b.index) return a.index < b.index;
    return a.file < b.file;
  });

  RowsOut out;
  auto size_all = [total](auto&... v) { (v.resize(total), ...); };
  size_all(out.rank, out.pid, out.lane, out.cat, out.name, out.sync, out.kind, out.category,
           out.kind_order, out.device, out.start, out.end, out.correlation, out.bytes, out.ext,
           out.index);
  out.out_row.assign(n, -1);
  for (size_t o = 0; o < total; ++o) {
    const Key& key = keys[o];
    size_t r = key.row;
    out.rank[o] = key.rank;
    out.start[o] = key.start;
    out.index[o] = key.index;
    if (r >= n) {  // a trace mark
      size_t f = r - n;
      out.pid[o] = 0;
      out.lane[o] = 0;
      out.cat[o] = mark_cat0 + static_cast<int32_t>(f);
      out.name[o] = mark_name;
      out.sync[o] = -1;
      out.kind[o] = u8(Kind::kMark);
      out.category[o] = u8(Category::kHost);
      out.device[o] = -1;
      out.end[o] = key.start;
      out.correlation[o] = 0;
      out.bytes[o] = 0;
      out.ext[o] = kNull;
    } else {
      out.out_row[r] = static_cast<int64_t>(o);
      out.pid[o] = static_cast<int32_t>(clip(in.pid[r], kI32Min, kI32Max, 0));
      out.lane[o] = static_cast<int32_t>(lane[r]);
      out.cat[o] = in.cat[r];
      out.name[o] = in.name[r];
      out.sync[o] = in.sync[r];
      out.kind[o] = kind[r];
      out.category[o] = category[r];
      out.device[o] = static_cast<int16_t>(device[r]);
      out.end[o] = key.start + in.dur[r];
      out.correlation[o] = correlation[r];
      out.bytes[o] = bytes[r];
      out.ext[o] = in.ext[r];
    }
    out.kind_order[o] = kind_order[out.kind[o]];
  }
  out.file_row0 = std::move(row0);
  out.file_kept = std::move(kept_by_file);
  return out;
}

}  // namespace stallscope::kineto
