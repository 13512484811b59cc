#include "buffer_pool.h"

#include <cstdlib>
#include <new>

namespace stallscope::cupti {

void BufferPool::reset_session(uint64_t buffer_bytes, uint64_t limit_bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  buffer_bytes_ = buffer_bytes;
  limit_bytes_ = limit_bytes;
  counts_ = PoolCounts{};
  // Buffers a previous session never got back (another tool took them) are not ours to count.
  counts_.bytes = free_.size() * free_size_;
  counts_.peak_bytes = counts_.bytes;
}

uint8_t* BufferPool::request(size_t* size) {
  std::lock_guard<std::mutex> lk(mu_);
  counts_.requested++;
  uint8_t* b = nullptr;
  if (!free_.empty() && free_size_ == buffer_bytes_) {
    b = free_.back();
    free_.pop_back();
  } else if (counts_.bytes + buffer_bytes_ <= limit_bytes_) {
    b = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
    if (b != nullptr) {
      counts_.bytes += buffer_bytes_;
      if (counts_.bytes > counts_.peak_bytes) counts_.peak_bytes = counts_.bytes;
    }
  }
  if (b == nullptr) {  // declined: CUPTI drops what it cannot store (and counts it)
    counts_.declined++;
    *size = 0;
    return nullptr;
  }
  counts_.outstanding++;
  *size = buffer_bytes_;
  return b;
}

void BufferPool::release(uint8_t* b, size_t size) {
  std::lock_guard<std::mutex> lk(mu_);
  if (counts_.outstanding > 0) counts_.outstanding--;
  if (size == buffer_bytes_) {
    free_size_ = size;
    free_.push_back(b);
  } else {  // from a session with another buffer size
    std::free(b);
    counts_.bytes = counts_.bytes > size ? counts_.bytes - size : 0;
  }
}

void BufferPool::free_idle() {
  std::lock_guard<std::mutex> lk(mu_);
  for (uint8_t* b : free_) std::free(b);
  const uint64_t freed = free_.size() * free_size_;
  counts_.bytes = counts_.bytes > freed ? counts_.bytes - freed : 0;  // late returns: never < 0
  free_.clear();
}

PoolCounts BufferPool::counts() {
  std::lock_guard<std::mutex> lk(mu_);
  return counts_;
}

void BufferPool::reinit_after_fork() noexcept { new (&mu_) std::mutex(); }

}  // namespace stallscope::cupti
