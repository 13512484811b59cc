// The two-thread scan (see segment_worker.h): the owner's side (StreamScanner::parse_split and
// its helpers), the worker's thread, the hand-over of events into the owner.
#include "kineto/segment_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>

#include "kineto/populate.h"

namespace stallscope::kineto {

namespace {

// Codes of `from` not mapped yet, interned into `to` in `from`'s order.
void extend(const Dict& from, Dict* to, std::vector<int32_t>* map) {
  const auto& strs = from.strings();
  for (size_t i = map->size(); i < strs.size(); ++i) map->push_back(to->intern(strs[i]));
}

template <typename T>
void append(std::vector<T>* to, const std::vector<T>& from) {
  to->insert(to->end(), from.begin(), from.end());
}

// Appends string codes through `map` (-1, null, stays -1).
void append_mapped(std::vector<int32_t>* to, const std::vector<int32_t>& from,
                   const std::vector<int32_t>& map) {
  size_t n0 = to->size();
  to->resize(n0 + from.size());
  int32_t* out = to->data() + n0;
  for (size_t i = 0; i < from.size(); ++i) out[i] = from[i] < 0 ? from[i] : map[from[i]];
}

// Appends event indices, offset by the owner's count of events before them.
void append_offset(std::vector<int64_t>* to, const std::vector<int64_t>& from, int64_t base) {
  size_t n0 = to->size();
  to->resize(n0 + from.size());
  int64_t* out = to->data() + n0;
  for (size_t i = 0; i < from.size(); ++i) out[i] = from[i] + base;
}

// A guess at an element's start in a list of objects, for parse_split: the first '{' in
// [from, e) that follows `}` `,` across whitespace (the bytes before it from `begin` on). The
// same bytes can sit inside a string; the caller checks.
const char* element_start(const char* begin, const char* from, const char* e) {
  for (const char* p = from; p < e; ++p) {
    p = static_cast<const char*>(std::memchr(p, '{', static_cast<size_t>(e - p)));
    if (p == nullptr) return nullptr;
    const char* q = p;
    while (q > begin && is_ws(q[-1])) --q;
    if (q == begin || q[-1] != ',') continue;
    --q;
    while (q > begin && is_ws(q[-1])) --q;
    if (q > begin && q[-1] == '}') return p;
  }
  return nullptr;
}

// A spin-wait hint: the core runs its sibling (or saves power) instead of the loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

size_t StreamScanner::parse_split(const char* begin, size_t size) {
  if (split_min_ == 0 || size < split_min_) return parse(begin, size, false);
  if (state_ != kEvent && state_ != kEventNext) {
    // The file's head (traceEvents' elements not reached yet): by this thread alone up to the
    // first element, then the rest split.
    size_t used = parse(begin, size, false, true);
    // Otherwise the span ran out (or the file ended, or failed) before the first element.
    return state_ == kEvent ? used + parse_split(begin + used, size - used) : used;
  }
  const char* end = begin + size;
  const auto from = static_cast<size_t>(static_cast<double>(size) * split_at_);
  const char* at = element_start(begin, begin + from, end);
  if (at == nullptr) return parse(begin, size, false);
  if (!worker_) worker_ = std::make_unique<SegmentWorker>();
  // The text is the fill buffer's (only flush_fill reads with two threads): it stays put until
  // take_pending, so the worker reads it in place.
  seg_begin_ = at;
  seg_size_ = static_cast<size_t>(end - at);
  worker_->start(seg_begin_, seg_size_, this);
  size_t used = parse(begin, static_cast<size_t>(at - begin), false);
  // This reading stopped right before `at`, about to read an element of traceEvents: state
  // kEvent, checkpoint after the ',' with only whitespace up to `at` (inside an event, the
  // checkpoint would be that event's '{').
  if (state_ == kEvent && std::all_of(begin + used, at, is_ws)) {
    worker_->take();
    pending_ = true;  // the rest is the worker's: taken at the next feed() or end_file()
    return size;
  }
  worker_->discard();
  if (state_ == kFailed) return used;
  ++splits_missed_;
  return used + parse(begin + used, size - used, false);
}

void StreamScanner::take_pending() {
  if (!pending_) return;
  pending_ = false;
  bool waited = false;
  size_t got = 0;
  try {
    got = worker_->wait(&waited);
  } catch (...) {  // the hand-over ran out of memory: the columns are not whole
    state_ = kFailed;
    reason_ = "out of memory";
    throw;
  }
  // Balance: this thread also does the caller's work between chunks (the gunzip), so its share
  // of a chunk follows whoever was late: the worker (this thread waited) or this thread.
  split_at_ = waited ? std::min(split_at_ + 0.02, 0.6) : std::max(split_at_ - 0.02, 0.1);
  if (got > 0) {  // the worker appended its events to ours
    ++splits_taken_;
    state_ = kEventNext;
  }  // else not one complete event: read here, from the start
  const char* b = seg_begin_;
  size_t n = seg_size_;
  size_t used = got + parse(b + got, n - got, false);
  if (state_ != kFailed) buf_.assign(b + used, n - used);  // cut by the chunk's end
}

size_t StreamScanner::scan_events(const char* begin, size_t size) {
  clear_events();
  cur_.reset(begin, begin + size, false);
  size_t used = 0;
  try {
    for (;;) {
      event();  // commits it
      used = static_cast<size_t>(cur_.pos() - begin);
      seg_ts_float_ = ts_any_float_;
      seg_dur_float_ = dur_any_float_;
      cur_.ws();
      if (cur_.next() != ',') break;  // ']' (or anything else) is for the owner to read
      cur_.ws();
    }
  } catch (const NeedMore&) {
  } catch (const Unsupported&) {  // the owner reads this event again and says why
  }
  return used;
}

void StreamScanner::clear_events() {
  for (auto& c : staged_.rows) c.clear();
  for (auto& c : staged_.strs) c.clear();
  for (auto& c : staged_.nccl) c.clear();
  for (auto& c : staged_.nccl_strs) c.clear();
  for (auto& c : staged_.flows) c.clear();
  staged_.flow_cat.clear();
  ts_flags_.clear();
  dur_flags_.clear();
  flow_ts_flags_.clear();
  events_ = 0;
  ts_any_float_ = dur_any_float_ = false;
  seg_ts_float_ = seg_dur_float_ = false;
}

template <typename Pred>
void SegmentWorker::block_until(Pred ready) {
  // Spin first: the clock is read once per 64 polls (a poll is a load and a pause).
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kSpinNs);
  for (int i = 1; !ready(); ++i) {
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) {
      std::unique_lock<std::mutex> lk(mu_);
      ++sleepers_;
      cv_.wait(lk, ready);
      --sleepers_;
      return;
    }
    cpu_relax();
  }
}

template <typename Set>
void SegmentWorker::publish(Set set) {
  bool wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    set();
    wake = sleepers_ > 0;  // read under mu_: a sleeper counts itself there before it sleeps
  }
  if (wake) cv_.notify_all();
}

SegmentWorker::SegmentWorker() : thread_([this] { run(); }) {}

SegmentWorker::~SegmentWorker() {
  publish([this] { quit_.store(true); });
  thread_.join();
}

void SegmentWorker::start(const char* begin, size_t size, StreamScanner* owner) {
  publish([&] {
    begin_ = begin;
    size_ = size;
    owner_ = owner;
    verdict_.store(kUndecided);
    done_.store(false);  // last: the job is whole when the worker sees it
  });
}

void SegmentWorker::take() {
  publish([this] { verdict_.store(kTake); });
}

void SegmentWorker::discard() {
  publish([this] {
    if (!done_.load()) verdict_.store(kDrop);
  });
  wait(nullptr);
}

size_t SegmentWorker::wait(bool* waited) {
  if (waited != nullptr) *waited = !done_.load();
  block_until([this] { return done_.load(); });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return used_;
}

void SegmentWorker::run() {
  for (;;) {
    block_until([this] { return !done_.load() || quit_.load(); });  // a job, or quit
    if (quit_.load()) return;
    size_t used = 0;
    try {
      used = scan_.scan_events(begin_, size_);
    } catch (...) {  // out of memory: nothing taken, the owner reads the part itself
      used = 0;
    }
    block_until([this] { return verdict_.load() != kUndecided || quit_.load(); });
    bool take = verdict_.load() == kTake;
    if (take && used > 0) {
      try {
        hand_over(owner_);
      } catch (...) {  // out of memory part way: the owner fails the file and raises it
        error_ = std::current_exception();
      }
    }
    scan_.clear_events();
    const bool ahead = take && used > 0 && error_ == nullptr;
    if (ahead) plan_ahead(*owner_);  // before done_: the owner's columns are still at rest
    publish([&] {
      used_ = take ? used : 0;
      done_.store(true);  // last: used_ and error_ are the owner's once it sees this
    });
    if (ahead) populate_ahead();
  }
}

template <typename T>
void SegmentWorker::plan_ahead(const std::vector<T>& column, Ahead* a) {
  if (a->data != column.data()) *a = Ahead{column.data()};  // moved: nothing populated there
  const auto base = reinterpret_cast<uintptr_t>(column.data());
  const size_t until = std::min(column.capacity(), column.size() + kAheadRows);
  a->from = std::max(a->done, base + column.size() * sizeof(T));
  a->to = base + until * sizeof(T);
}

void SegmentWorker::plan_ahead(const StreamScanner& owner) {
  const FileResult& r = owner.staged_;
  // The row, string and flow columns, flow_cat, and the three flag columns.
  constexpr size_t kColumns = size_t{kNumRowInt} + size_t{kNumRowStr} + size_t{kNumFlowInt} + 4;
  ahead_.resize(kColumns);
  Ahead* a = ahead_.data();
  for (const auto& c : r.rows) plan_ahead(c, a++);
  for (const auto& c : r.strs) plan_ahead(c, a++);
  for (const auto& c : r.flows) plan_ahead(c, a++);
  plan_ahead(r.flow_cat, a++);
  plan_ahead(owner.ts_flags_, a++);
  plan_ahead(owner.dur_flags_, a++);
  plan_ahead(owner.flow_ts_flags_, a++);
}

void SegmentWorker::populate_ahead() {
  constexpr uintptr_t kStep = uintptr_t{8} << 12;  // a few pages between looks at the flags
  for (Ahead& a : ahead_) {
    while (a.from < a.to) {
      if (!done_.load(std::memory_order_relaxed) || quit_.load(std::memory_order_relaxed)) return;
      const uintptr_t end = std::min(a.to, a.from + kStep);
      populate(reinterpret_cast<const void*>(a.from), end - a.from);
      a.from = a.done = end;
    }
  }
}

void SegmentWorker::hand_over(StreamScanner* owner) {
  StreamScanner& w = scan_;
  extend(w.cats_, &owner->cats_, &cat_map_);
  extend(w.names_, &owner->names_, &name_map_);
  extend(w.args_, &owner->args_, &args_map_);
  const FileResult& from = w.staged_;
  FileResult& to = owner->staged_;
  const int64_t base = owner->events_;
  for (int c = 0; c < kNumRowInt; ++c) {
    if (c == kRowIndex) {
      append_offset(&to.rows[c], from.rows[c], base);
    } else {
      append(&to.rows[c], from.rows[c]);
    }
  }
  append_mapped(&to.strs[kRowCat], from.strs[kRowCat], cat_map_);
  append_mapped(&to.strs[kRowName], from.strs[kRowName], name_map_);
  append_mapped(&to.strs[kRowSyncKind], from.strs[kRowSyncKind], args_map_);
  append(&owner->ts_flags_, w.ts_flags_);
  append(&owner->dur_flags_, w.dur_flags_);
  for (int c = 0; c < kNumNcclInt; ++c) {
    if (c == kNcclIndex) {
      append_offset(&to.nccl[c], from.nccl[c], base);
    } else {
      append(&to.nccl[c], from.nccl[c]);
    }
  }
  for (int c = 0; c < kNumNcclStr; ++c)
    append_mapped(&to.nccl_strs[c], from.nccl_strs[c], args_map_);
  for (int c = 0; c < kNumFlowInt; ++c) append(&to.flows[c], from.flows[c]);
  append_mapped(&to.flow_cat, from.flow_cat, cat_map_);
  append(&owner->flow_ts_flags_, w.flow_ts_flags_);
  owner->events_ += w.events_;
  owner->ts_any_float_ = owner->ts_any_float_ || w.seg_ts_float_;
  owner->dur_any_float_ = owner->dur_any_float_ || w.seg_dur_float_;
  w.clear_events();
}

}  // namespace stallscope::kineto
