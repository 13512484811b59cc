// The predictor's event engine, timed natively: tasks on in-order streams with dependencies,
// visited in a topological order given by the Python engine (stallscope/predict/_engine.py,
// the reference this must equal).
#pragma once

#include <cstdint>

namespace stallscope::predict {

struct EngineGraph {
  int64_t n = 0;                    // tasks
  const int32_t* order = nullptr;   // a topological order of the tasks (n)
  const int32_t* stream = nullptr;  // each task's stream (n)
  int64_t n_streams = 0;
  const int64_t* dep_ptr = nullptr;  // CSR of deps (n + 1)
  const int32_t* dep_idx = nullptr;
  const int64_t* wait_ptr = nullptr;  // CSR of wait_on (n + 1)
  const int32_t* wait_idx = nullptr;
};

// start, end and ready (ns) of every task for `duration` (ns); the three outputs hold n each.
// `free_at` is scratch of n_streams entries.
void engine_run(const EngineGraph& g, const int64_t* duration, int64_t* start, int64_t* end,
                int64_t* ready, int64_t* free_at);

// A topological order of the tasks (stream order plus deps plus wait_on, Kahn's algorithm,
// `order` ignored) into `out` (n); returns how many tasks it placed (< n: a dependency loop).
int64_t engine_order(const EngineGraph& g, int32_t* out);

}  // namespace stallscope::predict
