// CUPTI names threads in API, marker and overhead records by the low 32 bits of pthread_self()
// (Linux); stallscope's host events use the kernel thread id. Threads that use stallscope's API
// while CUPTI runs register the pair; ids that are already threads of this process (older CUPTI,
// the test fake) are kept; anything else stays as CUPTI wrote it.
#pragma once

#include <cstdint>

namespace stallscope::cupti {

// Registers the calling thread (once per thread; cheap afterwards).
void register_thread() noexcept;
// The lane (OS thread id) of a CUPTI thread id. Not thread-safe: the backend's parse lock.
int32_t lane_of_thread(uint32_t cupti_tid);
void reset_lane_cache();

}  // namespace stallscope::cupti
