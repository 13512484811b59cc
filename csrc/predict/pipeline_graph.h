// The planner's pipeline schedule graph (1F1B / interleaved 1F1B, per stage: compute, send, dp
// and ZeRO-3 streams), built natively task for task as stallscope/plan/_schedule.py's build()
// builds it (the reference this must equal), for the strategy search's many shapes.
#pragma once

#include <cstdint>
#include <vector>

namespace stallscope::predict {

struct PipelineShape {
  int32_t pp = 1, micro_batches = 1, interleave = 1, layers_per_chunk = 1;
  bool zero3 = false, dp_overlap = false, tied = false, param_gather = false, detail = false;
  bool p2p_blocking = false;  // sends on the compute stream (Megatron without p2p overlap)
  bool dp_blocking = false;   // gradient collectives on the compute stream (after the backward)
  // ZeRO-3's backward gathers start when the layer after has its gradients (BACKWARD_POST)
  bool gather_after_backward = false;
};

struct PipelineGraph {
  std::vector<int32_t> stream;        // per task
  std::vector<int32_t> stream_class;  // per stream: its pipeline stage
  std::vector<int32_t> slot;          // per task: index into the planner's SLOTS
  std::vector<double> mult;           // per task: the slot's multiplier
  std::vector<int32_t> chunk;         // per task: its model chunk, or -1 for once-per-step work
  std::vector<int64_t> dep_ptr{0};
  std::vector<int32_t> dep_idx;
  std::vector<int32_t> wait;  // per task: the send it waits on, or -1
};

PipelineGraph pipeline_graph(const PipelineShape& shape);

}  // namespace stallscope::predict
