#include "kineto/detail_job.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

DetailJob::DetailJob(const int32_t* cat, const int64_t* ext, const int32_t* sync, size_t n,
                     std::vector<std::string> cat_table, std::vector<std::string> sync_table)
    : cat_(cat),
      ext_(ext),
      sync_(sync),
      n_(n),
      cat_table_(std::move(cat_table)),
      sync_table_(std::move(sync_table)) {
  // The codes checked and each part's text bounded, so the builder's buffers are sized once,
  // here.
  std::vector<size_t> starts{0}, bytes;
  size_t bound = 0;
  for (size_t i = 0; i < n_; ++i) {
    if (cat_[i] < 0 || static_cast<size_t>(cat_[i]) >= cat_table_.size() ||
        (sync_[i] >= 0 && static_cast<size_t>(sync_[i]) >= sync_table_.size())) {
      throw std::out_of_range("kineto_detail: a code past its table's end");
    }
    bound += row_bound(i);
    if ((i + 1) % kPart == 0 || i + 1 == n_) {
      starts.push_back(i + 1);
      bytes.push_back(std::exchange(bound, 0));
    }
  }
  builder_.emplace(starts, bytes);
  back_ = bytes.size();
}

DetailJob::~DetailJob() { join(); }

void DetailJob::start(size_t threads) {
  if (started_) throw std::logic_error("kineto_detail: the job was started already");
  if (threads == 0) throw std::invalid_argument("kineto_detail: start() needs 1 thread or more");
  for (size_t t = 0; t < threads; ++t) {
    threads_.emplace_back([this] {
      try {
        for (size_t k = 0; claim(true, &k);) fill(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(claim_);
        if (!failed_) failed_ = std::current_exception();
      }
    });
    started_ = true;  // once a thread runs: else result() writes the rows itself
  }
}

std::shared_ptr<const arrow::Column> DetailJob::result() {
  if (!builder_) throw std::logic_error("kineto_detail: the job's result was taken already");
  started_ = true;
  std::exception_ptr mine;
  try {
    for (size_t k = 0; claim(false, &k);) fill(k);
  } catch (...) {
    mine = std::current_exception();  // after the threads are joined: they write the builder
  }
  join();
  if (mine) std::rethrow_exception(mine);
  if (failed_) std::rethrow_exception(failed_);
  auto col = builder_->finish("detail");
  builder_.reset();
  return col;
}

void DetailJob::join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t DetailJob::row_bound(size_t i) const {
  return cat_table_[static_cast<size_t>(cat_[i])].size() + (ext_[i] != kNull ? 25 : 0) +
         (sync_[i] >= 0 ? 11 + sync_table_[static_cast<size_t>(sync_[i])].size() : 0);
}

bool DetailJob::claim(bool front, size_t* k) {
  std::lock_guard<std::mutex> lock(claim_);
  if (front_ >= back_) return false;
  *k = front ? front_++ : --back_;
  return true;
}

void DetailJob::fill(size_t k) {
  arrow::ViewBuilder::Part b = builder_->part(k);
  auto put = [](char* w, std::string_view s) {
    std::memcpy(w, s.data(), s.size());
    return w + s.size();
  };
  for (size_t i = k * kPart, end = std::min(n_, i + kPart); i < end; ++i) {
    char* const row = b.row_space(row_bound(i));
    char* w = put(row, cat_table_[static_cast<size_t>(cat_[i])]);
    if (ext_[i] != kNull) {
      w = put(w, ";ext=");
      w = std::to_chars(w, w + 20, ext_[i]).ptr;  // at most 20 characters: "-" and 19 digits
    }
    if (sync_[i] >= 0) {
      w = put(w, ";sync_kind=");
      w = put(w, sync_table_[static_cast<size_t>(sync_[i])]);
    }
    b.end_row_at(static_cast<size_t>(w - row));
  }
}

}  // namespace stallscope::kineto
