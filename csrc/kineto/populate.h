// populate: fault in pages for writing without writing them, for code that knows which fresh
// memory it is about to fill and has a thread with time to spare.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace stallscope::kineto {

// Faults in the whole pages inside [p, p + bytes) for writing (MADV_POPULATE_WRITE, Linux
// 5.14; older kernels refuse it and the pages fault on first write as before). Content is left
// as it is, so another thread may write the same memory meanwhile; a range no longer mapped
// only makes the call fail.
inline void populate(const void* p, size_t bytes) {
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE (not in every libc's headers)
  static const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, kPopulateWrite);
}

}  // namespace stallscope::kineto
