// The capped pool of host buffers handed to CUPTI for activity records. Past the cap a request
// is declined (CUPTI then drops and counts what it cannot store): profiling memory stays bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace stallscope::cupti {

struct PoolCounts {
  uint64_t requested = 0;    // buffers CUPTI asked for this session
  uint64_t declined = 0;     // requests refused at the cap
  uint64_t outstanding = 0;  // handed to CUPTI, not completed back
  uint64_t bytes = 0;        // bytes allocated now
  uint64_t peak_bytes = 0;   // most bytes allocated at once this session
};

class BufferPool {
 public:
  // A new session: buffers of buffer_bytes (a multiple of 8), at most limit_bytes in all.
  // Counters restart; idle buffers are kept (reused when the size matches).
  void reset_session(uint64_t buffer_bytes, uint64_t limit_bytes);
  // A buffer for CUPTI (its size in *size), or nullptr when the cap is reached (counted).
  uint8_t* request(size_t* size);
  // A buffer CUPTI completed back: kept for reuse, or freed if from an older buffer size.
  void release(uint8_t* b, size_t size);
  // Frees the idle buffers (at stop).
  void free_idle();
  PoolCounts counts();
  // After fork(): a parent thread may have held the lock.
  void reinit_after_fork() noexcept;

 private:
  std::mutex mu_;
  std::vector<uint8_t*> free_;  // idle buffers of free_size_ bytes
  uint64_t free_size_ = 0;
  uint64_t buffer_bytes_ = 0;  // this session's buffer size
  uint64_t limit_bytes_ = 0;   // this session's cap
  PoolCounts counts_;
};

}  // namespace stallscope::cupti
