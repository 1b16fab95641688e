#pragma once
// The terms of one training step's cost, each a function of the model, the cluster, the layout and
// what earlier terms found: compute per chunk, each kind of communication, the pipeline's timeline,
// data-parallel traffic, the optimizer, memory, and the step's time split into its parts.
// estimate_step (cost_model.cpp) adds them up. Units: seconds, bytes.
#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "pipeline/simulate.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"
#include "plan/schedule_timings.hpp"
#include "plan/step_shape.hpp"

namespace mt::plan {

// One micro-batch through one piece on one rank (tensor parallelism splits it).
struct ChunkTimes {
  double forward = 0;
  double backward = 0;      // with the forward again under full recomputation
  double input_grad = 0;    // of backward: all but the weight gradients
  double weight_grad = 0;
  double linear_gemms = 0;  // of forward: what tensor-parallel collectives overlap
  double attention = 0;     // of forward: what context parallelism's ring overlaps
};
ChunkTimes chunk_times(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s);

// Communication one chunk exposes beside its compute, forward and backward.
struct PassComm {
  double forward = 0, backward = 0;
};
PassComm tensor_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                              const ChunkTimes& t);
PassComm context_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                               const ChunkTimes& t);
PassComm expert_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                              const ChunkTimes& t);

struct ChunkComm {
  PassComm tp, cp, ep;
  double forward() const { return tp.forward + cp.forward + ep.forward; }
  double backward() const { return tp.backward + cp.backward + ep.backward; }
};

// Seconds of one point-to-point transfer between pipeline neighbours.
double pipeline_latency(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s);

// Parameters one rank holds, and how many ranks replicate them.
struct HeldParams {
  double dense = 0, expert = 0;
  int dense_replicas = 0, expert_replicas = 0;
};
HeldParams held_params(const ModelConfig& m, const Layout& l, const StepShape& s);

// Data-parallel traffic: the whole of it, the part each chunk moves beside its compute (sharded
// gradients, FSDP's weight gathers) and the part left for the end of the step.
struct DataParallelTraffic {
  double full = 0, per_chunk = 0, at_end = 0;
};
DataParallelTraffic data_parallel_traffic(const Cluster& c, const Layout& l, const StepShape& s,
                                          const HeldParams& h);

// The busiest pipeline rank's forward FLOPs over the average rank's; 1 without a schedule.
double stage_imbalance(const ModelConfig& m, const Layout& l);

// What the schedule simulator is given per chunk, at the busiest rank's pace `k` (latency aside).
pipeline::Costs chunk_costs(const Cluster& c, const Layout& l, const StepShape& s, const ChunkTimes& t,
                            const ChunkComm& comm, const DataParallelTraffic& dp, double k);

// Work per micro-batch on the average rank in the steady state (the busiest takes k times it).
struct MicroBatchWork {
  double total = 0, compute = 0;
};
MicroBatchWork microbatch_work(const Layout& l, const StepShape& s, const ChunkTimes& t, const ChunkComm& comm,
                               const pipeline::Costs& costs, double k);

// Weights, gradients and optimizer state per rank as the BF16 recipe stores them (activations: 0).
Memory state_memory(const Layout& l, const HeldParams& h);

// The schedule's makespan, and the most chunks a rank keeps alive at once.
struct PipelineTime {
  double makespan = 0;
  int peak_chunks = 1;
};
PipelineTime pipeline_time(const Layout& l, const StepShape& s, const MicroBatchWork& work,
                           const pipeline::Costs& costs, ScheduleTimings& timings);

// Data-parallel time the step waits for: what overlap leaves of the end-of-step traffic, and
// outside DualPipe's pairs the per-chunk traffic that compute does not hide.
double data_parallel_time(const Cluster& c, const Layout& l, const StepShape& s, const ChunkTimes& t,
                          const DataParallelTraffic& dp);

// AdamW's pass over the rank's FP32 state.
double optimizer_time(const Cluster& c, const Layout& l, const HeldParams& h);

// The step's time split into the parts of Breakdown, optimizer aside.
Breakdown step_breakdown(const StepShape& s, const ChunkComm& comm, const DataParallelTraffic& dp,
                         const MicroBatchWork& work, double makespan, double dp_time, double k);

}  // namespace mt::plan
