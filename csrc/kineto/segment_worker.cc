// SegmentWorker (see segment_worker.h): the thread, the hand-over of events into the owner.
#include "kineto/segment_worker.h"

#include <algorithm>

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

}  // namespace

SegmentWorker::SegmentWorker() : thread_([this] { run(); }) {}

SegmentWorker::~SegmentWorker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SegmentWorker::start(const char* begin, size_t size) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    begin_ = begin;
    size_ = size;
    job_ = true;
    done_ = false;
  }
  cv_.notify_all();
}

size_t SegmentWorker::wait(bool* waited) {
  std::unique_lock<std::mutex> lk(mu_);
  if (waited != nullptr) *waited = !done_;
  cv_.wait(lk, [this] { return done_; });
  return used_;
}

void SegmentWorker::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return job_ || quit_; });
    if (quit_) return;
    const char* begin = begin_;
    size_t size = size_;
    lk.unlock();
    size_t used = 0;
    try {
      used = scan_.scan_events(begin, size);
    } catch (...) {  // out of memory: nothing taken, the owner reads the half itself
      used = 0;
    }
    lk.lock();
    used_ = used;
    job_ = false;
    done_ = true;
    cv_.notify_all();
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
