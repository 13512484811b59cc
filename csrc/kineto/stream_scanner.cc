// The streaming Kineto reader (see stream_scanner.h): a resumable state machine over the top
// level, one event at a time. A value cut by a chunk's end is read again from its start once the
// next chunk has arrived (NeedMore), so nothing is committed from a partial event.
#include "kineto/stream_scanner.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif
#include <utility>

#include "kineto/event_keys.h"
#include "kineto/segment_worker.h"

namespace stallscope::kineto {

namespace {

constexpr int64_t kMaxIp = 9000000000000000;     // integer µs below 9e15: x1000 stays in int64
constexpr int64_t kMaxNs = 2000000000000000000;  // |ts| and dur bound (base + ts + dur in int64)

// Signed decimal digits (<= 18) -> value; false when not of that form.
bool small_int(std::string_view t, int64_t* v) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) neg = t[i++] == '-';
  size_t nd = t.size() - i;
  if (nd == 0 || nd > 18) return false;
  int64_t x = 0;
  for (; i < t.size(); ++i) {
    if (!is_digit(t[i])) return false;
    x = x * 10 + (t[i] - '0');
  }
  *v = neg ? -x : x;
  return true;
}

double as_double(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// ns of a value written as `flags`/`bits`, under the file's decision (float64 or integer µs);
// kNull when absent or out of range. Float64: floor, then the fraction rounded half to even (the
// importer's ns_from_float); integers: exact.
int64_t to_ns(uint8_t flags, int64_t bits, bool as_float) {
  if (!(flags & 1)) return kNull;
  if (as_float) {
    double s = (flags & 2) ? as_double(bits) : static_cast<double>(bits);
    if (!std::isfinite(s) || std::fabs(s) >= 9e15) return kNull;
    double ip = std::floor(s);
    double frac = std::nearbyint((s - ip) * 1000.0);
    return static_cast<int64_t>(ip) * 1000 + static_cast<int64_t>(frac);
  }
  if (bits >= kMaxIp || bits <= -kMaxIp) return kNull;
  return bits * 1000;
}

// Cores this process may run on: its affinity mask where there is one (hardware_concurrency
// counts the machine's, also for a process pinned to one core).
unsigned usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
#endif
  return std::thread::hardware_concurrency();
}

}  // namespace

StreamScanner::StreamScanner(size_t split_min, size_t fill_bytes)
    : fill_bytes_(std::max<size_t>(fill_bytes, 1)),
      split_min_(usable_cores() >= 2 ? split_min : 0) {}

StreamScanner::~StreamScanner() {
  drop_pending();  // the worker reads held_, destroyed before it
}

void StreamScanner::drop_pending() {
  if (!pending_) return;
  pending_ = false;
  worker_->discard();
}

void StreamScanner::Event::clear() {
  ph = 0;
  for (auto& v : ints) v = kNull;
  for (auto& v : strs) v = -1;
  for (auto& v : nccl) v = kNull;
  for (auto& v : nccl_strs) v = -1;
  id = kNull;
  ts = Time{0, 0};
  dur = Time{0, 0};
}

void StreamScanner::begin_file(size_t text_bytes) {
  drop_pending();  // a file left before its end: its last split is dropped
  state_ = kStart;
  buf_.clear();
  fill_size_ = 0;
  reason_.clear();
  found_events_ = false;
  meta_.clear();
  rank_.reset();
  clear_events();
  staged_ = FileResult();          // its memory too (a declined file's rows)
  size_t rows = text_bytes / 200;  // Kineto events take 200-450 bytes of text each
  if (rows > 0) {
    for (auto& c : staged_.rows) c.reserve(rows);
    for (auto& c : staged_.strs) c.reserve(rows);
    ts_flags_.reserve(rows);
    dur_flags_.reserve(rows);
    // Flow events (two per kernel launch's ac2g link) as many: a column that outgrows its
    // reservation is copied into fresh pages (the V100 import: ~135 page faults more).
    for (auto& c : staged_.flows) c.reserve(rows);
    staged_.flow_cat.reserve(rows);
    flow_ts_flags_.reserve(rows);
  }
}

bool StreamScanner::feed(std::string_view chunk) {
  if (split_min_ == 0) return feed_now(chunk);
  while (!chunk.empty()) {  // gathered into the fill buffer: one split per kFillBytes
    Span space = input_space();
    size_t n = std::min(space.size, chunk.size());
    std::memcpy(space.data, chunk.data(), n);
    chunk.remove_prefix(n);
    if (!input_done(n)) return false;
  }
  return state_ != kFailed;
}

void StreamScanner::release_buffers() {
  drop_pending();  // a file left before its end: its last split is dropped
  worker_.reset();
  fill_.reset();
  held_.reset();
  fill_size_ = 0;
  std::string().swap(buf_);
}

StreamScanner::Span StreamScanner::input_space() {
  if (!fill_) fill_ = std::make_unique<char[]>(fill_bytes_);
  return Span{fill_.get() + fill_size_, fill_bytes_ - fill_size_};
}

bool StreamScanner::input_done(size_t n) {
  fill_size_ += n;
  if (fill_size_ < fill_bytes_) return state_ != kFailed;
  return flush_fill();
}

bool StreamScanner::flush_fill() {
  if (fill_size_ == 0) return state_ != kFailed;
  bool ok = feed_now(std::string_view(fill_.get(), fill_size_));
  std::swap(fill_, held_);  // held_: what the worker reads; fill_: free again
  fill_size_ = 0;
  return ok;
}

bool StreamScanner::feed_now(std::string_view chunk) {
  take_pending();
  if (state_ == kFailed) return false;
  rank_.feed(chunk);
  // A value cut by the previous chunk's end: complete it from the head of this chunk (growing
  // the piece until the cut value is through), then read the rest of the chunk in place.
  while (!buf_.empty() && !chunk.empty()) {
    size_t pending = buf_.size();
    size_t take = std::min(chunk.size(), std::max(pending, size_t{1} << 12));
    buf_.append(chunk.data(), take);
    size_t used = parse(buf_.data(), buf_.size(), false);
    if (state_ == kFailed) return false;
    if (used >= pending) {  // past the old text: what is left is in the chunk
      chunk.remove_prefix(used - pending);
      buf_.clear();
      break;
    }
    buf_.erase(0, used);
    chunk.remove_prefix(take);
  }
  if (buf_.empty() && !chunk.empty()) {
    size_t used = parse_split(chunk.data(), chunk.size());
    if (state_ == kFailed) return false;
    buf_.assign(chunk.data() + used, chunk.size() - used);
  }
  return true;
}

bool StreamScanner::end_file(FileResult* out) {
  flush_fill();
  take_pending();
  if (state_ != kFailed) parse(buf_.data(), buf_.size(), true);
  buf_.clear();
  if (state_ != kFailed && state_ != kDone) {
    state_ = kFailed;
    reason_ = "truncated JSON";
  }
  if (state_ == kFailed) return false;
  if (!found_events_) {
    reason_ = "no traceEvents";
    state_ = kFailed;
    return false;
  }
  rank_.finish();
  FileResult& r = staged_;
  r.events = events_;

  // Times under the file-wide decision, then the importer's row checks, compacting in place.
  std::vector<int64_t>* rows = r.rows;
  size_t n = rows[kRowIndex].size(), kept = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t ts = to_ns(ts_flags_[i], rows[kRowTs][i], ts_any_float_);
    int64_t dur = to_ns(dur_flags_[i], rows[kRowDur][i], dur_any_float_);
    bool has_dur = dur_flags_[i] & kHas;
    bool has_cat = r.strs[kRowCat][i] >= 0;
    bool bad_ts = ts == kNull || ts > kMaxNs || ts < -kMaxNs;
    bool bad_dur = dur == kNull || dur > kMaxNs;
    r.problems[kNoDur] += !has_dur;
    r.problems[kNoCat] += !has_cat && has_dur;
    r.problems[kBadTime] += (bad_ts || bad_dur) && has_dur && has_cat;
    r.problems[kNegativeDur] += dur != kNull && dur < 0;
    if (!has_dur || !has_cat || bad_ts || dur == kNull || dur < 0 || dur > kMaxNs) continue;
    if (kept != i) {  // rows move down only after a drop
      for (int c = 0; c < kNumRowInt; ++c) rows[c][kept] = rows[c][i];
      for (int c = 0; c < kNumRowStr; ++c) r.strs[c][kept] = r.strs[c][i];
    }
    rows[kRowTs][kept] = ts;
    rows[kRowDur][kept] = dur;
    ++kept;
  }
  for (auto& c : r.rows) c.resize(kept);
  for (auto& c : r.strs) c.resize(kept);
  auto& flow_ts = r.flows[kFlowTs];
  for (size_t i = 0; i < flow_ts.size(); ++i) {
    flow_ts[i] = to_ns(flow_ts_flags_[i], flow_ts[i], ts_any_float_);
  }
  r.ts_float = ts_any_float_ && kept > 0;
  r.meta_json = "{\"traceEvents\":[]";
  r.meta_json += meta_;
  r.meta_json += "}";
  r.rank_found = rank_.found();
  r.rank = rank_.rank();
  *out = std::move(r);
  begin_file();
  return true;
}

size_t StreamScanner::parse(const char* begin, size_t size, bool final, bool until_events) {
  cur_.reset(begin, begin + size, final);
  size_t used = 0;  // the checkpoint: what was read up to the last complete value
  try {
    for (;;) {
      used = static_cast<size_t>(cur_.pos() - begin);
      if (until_events && state_ == kEvent) return used;
      switch (state_) {
        case kStart:
          cur_.ws();
          cur_.expect('{');
          state_ = kTopFirst;
          break;
        case kTopFirst:
          cur_.ws();
          if (cur_.peek() == '}') {
            cur_.next();
            state_ = kDone;
          } else {
            state_ = kTopKey;
          }
          break;
        case kTopKey:
          top_member();
          break;
        case kTopNext: {
          cur_.ws();
          char c = cur_.next();
          if (c == '}') {
            state_ = kDone;
          } else if (c == ',') {
            state_ = kTopKey;
          } else {
            throw Unsupported{"malformed JSON"};
          }
          break;
        }
        case kEvent:
          cur_.ws();
          event();
          state_ = kEventNext;
          break;
        case kEventNext: {
          cur_.ws();
          char c = cur_.next();
          if (c == ']') {
            state_ = kTopNext;
          } else if (c == ',') {
            state_ = kEvent;
          } else {
            throw Unsupported{"malformed JSON"};
          }
          break;
        }
        case kDone:
          cur_.ws();
          if (!cur_.at_end()) throw Unsupported{"trailing data"};
          return size;
        case kFailed:
          return used;
      }
    }
  } catch (const NeedMore&) {
    // The cut value is read again, from the checkpoint, with the next chunk.
  } catch (const Unsupported& u) {
    state_ = kFailed;
    reason_ = u.why;
  }
  return used;
}

void StreamScanner::top_member() {
  cur_.ws();
  const char* at = cur_.pos();
  std::string_view k = cur_.str();
  bool events = k == "traceEvents";
  cur_.ws();
  cur_.expect(':');
  cur_.ws();
  if (events) {
    if (found_events_) throw Unsupported{"duplicate traceEvents"};
    if (cur_.next() != '[') throw Unsupported{"traceEvents not a list"};
    cur_.ws();
    bool empty = cur_.peek() == ']';  // may still need more text: nothing is set before it
    found_events_ = true;
    if (empty) {
      cur_.next();
      state_ = kTopNext;
    } else {
      state_ = kEvent;
    }
    return;
  }
  cur_.skip_value(0);
  meta_ += ',';
  meta_.append(at, static_cast<size_t>(cur_.pos() - at));
  state_ = kTopNext;
}

void StreamScanner::int_field(int64_t* out) {
  char c = cur_.peek();
  if (cur_.null_here()) return;
  int64_t v = 0;
  if (c == '"') {
    std::string_view s = cur_.str();
    bool digit = false;
    for (char ch : s) digit = digit || is_digit(ch);
    if (!digit) return;  // "Spans", "Traces": null
    if (!small_int(s, &v)) throw Unsupported{"numeric string in an integer field"};
  } else if (c == '-' || is_digit(c)) {
    bool is_int;
    std::string_view t;
    if (!cur_.integer(&v, &is_int, &t)) throw Unsupported{"non-integer in an integer field"};
  } else {
    throw Unsupported{"non-scalar in an integer field"};
  }
  *out = v;
}

void StreamScanner::str_field(Dict& dict, int32_t* out) {
  if (cur_.peek() != '"') {
    if (cur_.null_here()) return;
    throw Unsupported{"non-string in a string field"};
  }
  std::string_view v = cur_.plain_str();  // most names: one SSE2 run to the closing quote
  *out = dict.intern(v.data() != nullptr ? v : cur_.str());
}

void StreamScanner::time_field(Time* t, bool* any_float) {
  if (cur_.null_here()) return;
  char c = cur_.peek();
  if (!(c == '-' || is_digit(c))) throw Unsupported{"non-number time"};
  int64_t v = 0;
  if (cur_.integer_quick(&v)) {  // Kineto's integer µs
    *t = Time{kHas, v};
    return;
  }
  double d = 0;
  if (!cur_.decimal_fast(&d)) {  // else the general reading: integer, then any float
    bool is_int;
    std::string_view s;
    if (cur_.integer_bytewise(&v, &is_int, &s)) {
      *t = Time{kHas, v};
      return;
    }
    if (is_int) throw Unsupported{"integer time beyond int64"};
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(d)) {
      throw Unsupported{"float time out of range"};
    }
  }
  if (d == 0 && std::signbit(d)) throw Unsupported{"float time out of range"};
  int64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  *t = Time{static_cast<uint8_t>(kHas | kFloat), bits};
  *any_float = true;
}

int StreamScanner::next_gap(Gap* g, unsigned pos) {
  const char* from = cur_.pos();
  if (g != nullptr && cur_.left() > static_cast<ptrdiff_t>(Gap::kMax) && g->matches(from) &&
      (g->key == kGapEnd || static_cast<unsigned char>(from[g->len]) > 0x20)) {
    cur_.skip(g->len);
    return g->key;
  }
  cur_.ws();  // token by token: the separator (none before the first key)
  if (pos > 0 || cur_.peek() == '}') {
    char d = cur_.next();
    if (d == '}') {
      if (g != nullptr) g->learn(from, cur_.pos(), kGapEnd);
      return kGapEnd;
    }
    if (d != ',') throw Unsupported{"malformed JSON"};
    cur_.ws();
  }
  return kGapMiss;
}

void StreamScanner::args(Event& ev) {
  if (cur_.null_here()) return;
  if (cur_.next() != '{') throw Unsupported{"args not an object"};
  uint32_t seen = 0;
  int64_t ignored = 0;
  // Layout class: the event's category (its code; 0 for none): each lays its args out alike.
  Gap* gaps = args_gaps_.row(static_cast<unsigned>(ev.strs[kRowCat] + 1));
  for (unsigned pos = 0;; ++pos) {
    const char* gap = cur_.pos();
    Gap* g = pos < args_gaps_.positions() ? gaps + pos : nullptr;
    int which = next_gap(g, pos);  // the kArgKeys entry of the key, -1 for keys not read
    if (which == kGapEnd) return;
    if (which == kGapMiss) {
      std::string_view k;
      if (cur_.peek() == '"') k = cur_.plain_str();  // most keys: one SSE2 run
      if (k.data() == nullptr) k = cur_.str();
      if (cur_.left() >= 2 && (cur_.word16() == 0x203a)) {  // ": " little-endian
        cur_.skip(2);
      } else {
        cur_.ws();
        cur_.expect(':');
      }
      cur_.ws();
      which = arg_index(k);
      keep_gap(g, gap, which);
    }
    if (which < 0) {
      cur_.skip_value(1);
      continue;
    }
    if (seen & (1u << which)) throw Unsupported{"duplicate arg"};
    seen |= 1u << which;
    const ArgKey& a = kArgKeys[which];
    switch (a.kind) {
      case kArgRow:
        int_field(&ev.ints[a.field]);
        break;
      case kArgSync:
        str_field(args_, &ev.strs[kRowSyncKind]);
        break;
      case kArgNcclInt:
        int_field(&ev.nccl[a.field]);
        break;
      case kArgNcclStr:
        str_field(args_, &ev.nccl_strs[a.field]);
        break;
      case kArgCheckedInt:
        int_field(&ignored);
        break;
      case kArgScalar:
        skip_scalar("non-scalar arg");
        break;
    }
  }
}

void StreamScanner::event() {
  if (cur_.next() != '{') throw Unsupported{"event not an object"};
  Event& ev = ev_;
  ev.clear();
  uint32_t seen = 0;
  // Layout class (layout_memo.h): 0 until ph is read, then 1 + ev.ph.
  Gap* gaps = event_gaps_.row(0);
  for (unsigned pos = 0;; ++pos) {
    // The gap to the next value (or the end), in one compare where this layout had it before.
    const char* gap = cur_.pos();
    Gap* g = pos < event_gaps_.positions() ? gaps + pos : nullptr;
    int got = next_gap(g, pos);
    if (got == kGapEnd) break;
    auto k = static_cast<EvKey>(got);
    if (got == kGapMiss) {  // the key and its colon, token by token
      size_t len = 0;
      int quick = cur_.left() >= 8 ? quick_event_key(cur_.word(), &len) : -1;
      if (quick >= 0) {  // Kineto's spelling: "key": in one masked compare (and its blank)
        k = static_cast<EvKey>(quick);
        cur_.skip(len + (((cur_.word() >> (8 * len)) & 0xFF) == ' '));
      } else {
        std::string_view key = cur_.short_key();
        k = event_key(key.empty() ? cur_.str() : key);
        cur_.ws();
        cur_.expect(':');
      }
      cur_.ws();
      keep_gap(g, gap, k);
    }
    if (k != kEvOther) {
      if (seen & (1u << k)) throw Unsupported{"duplicate event key"};
      seen |= 1u << k;
    }
    switch (k) {
      case kEvPh: {
        if (cur_.null_here()) break;
        if (cur_.peek() != '"') throw Unsupported{"non-string in a string field"};
        std::string_view ph = cur_.plain_str();
        if (ph.data() == nullptr) ph = cur_.str();
        ev.ph = same(ph, "X") ? 1 : (same(ph, "s") || same(ph, "f") || same(ph, "t")) ? 2 : 0;
        gaps = event_gaps_.row(1 + static_cast<unsigned>(ev.ph));
        break;
      }
      case kEvCat:
        str_field(cats_, &ev.strs[kRowCat]);
        break;
      case kEvName:
        str_field(names_, &ev.strs[kRowName]);
        break;
      case kEvPid:
        int_field(&ev.ints[kRowPid]);
        break;
      case kEvTid:
        int_field(&ev.ints[kRowTid]);
        break;
      case kEvId:
        int_field(&ev.id);
        break;
      case kEvTs:
        time_field(&ev.ts, &ts_any_float_);
        break;
      case kEvDur:
        time_field(&ev.dur, &dur_any_float_);
        break;
      case kEvArgs:
        args(ev);
        break;
      case kEvBp:
        skip_scalar("non-scalar bp");
        break;
      default:
        cur_.skip_value(1);
        break;
    }
  }
  commit(ev);
}

void StreamScanner::commit(const Event& ev) {
  int64_t index = events_++;
  FileResult& r = staged_;
  if (ev.ph == 1) {
    for (int c = 0; c < kNumRowInt; ++c) r.rows[c].push_back(ev.ints[c]);
    r.rows[kRowIndex].back() = index;
    r.rows[kRowTs].back() = ev.ts.bits;
    r.rows[kRowDur].back() = ev.dur.bits;
    ts_flags_.push_back(ev.ts.flags);
    dur_flags_.push_back(ev.dur.flags);
    for (int c = 0; c < kNumRowStr; ++c) r.strs[c].push_back(ev.strs[c]);
    if (ev.nccl_strs[kNcclColl] >= 0) {
      for (int c = 0; c < kNumNcclInt; ++c) r.nccl[c].push_back(ev.nccl[c]);
      r.nccl[kNcclIndex].back() = index;
      for (int c = 0; c < kNumNcclStr; ++c) r.nccl_strs[c].push_back(ev.nccl_strs[c]);
    }
  } else if (ev.ph == 2) {
    r.flows[kFlowPid].push_back(ev.ints[kRowPid]);
    r.flows[kFlowTid].push_back(ev.ints[kRowTid]);
    r.flows[kFlowTs].push_back(ev.ts.bits);
    r.flows[kFlowId].push_back(ev.id);
    flow_ts_flags_.push_back(ev.ts.flags);
    r.flow_cat.push_back(ev.strs[kRowCat]);
  }
}

}  // namespace stallscope::kineto
