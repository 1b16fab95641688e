#pragma once
// One training step of a model under a parallel layout on a cluster: compute per pipeline chunk
// from FLOPs and efficiency, communication on the link each collective crosses, overlap as the
// schedule allows, the bubble from the schedule simulator, and memory per rank.
#include <string>

#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "parallel/storage_model.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/simulate.hpp"
#include "plan/cluster.hpp"
#include "plan/muon_cost.hpp"
#include "plan/schedule_timings.hpp"

namespace mt::plan {

// The layout vocabulary is the trainer's too (parallel/layout.hpp).
using mt::Layout;
using mt::layout_text;
using mt::parse_layout;
using mt::Storage;

// moetrain's own storage per rank and where a schedule puts the pieces (parallel/storage_model.hpp).
using Memory = mt::RankMemory;
using mt::placement_of;
using mt::trainer_memory;

// Seconds per step, each part exposed on the critical path (they sum to the step time).
struct Breakdown {
  double compute = 0;
  double tp = 0, ep = 0;  // exposed tensor- and expert-parallel communication
  double cp = 0;          // exposed context-parallel (ring attention) communication
  double imbalance = 0;   // ranks waiting for the busiest one (layers and heads do not split evenly)
  double bubble = 0;      // pipeline idle, including point-to-point latency
  double dp = 0;          // data-parallel gradient and parameter traffic
  double optimizer = 0;
};

struct Estimate {
  Layout layout;
  int microbatches = 0;  // per pipeline, per step
  double step_s = 0;
  Breakdown time;
  Memory memory;         // per rank, bytes
  double memory_limit = 0;
  bool fits = false;
  double mfu = 0;                    // model FLOPs (causal, with MTP) / (step * accelerators * BF16 peak)
  double tokens_per_s_per_accel = 0;
  pipeline::Costs chunk_costs;       // what the schedule simulator was given
  int peak_live_chunks = 0;
  double stage_imbalance = 1;        // busiest rank's work over the average rank's
};

// Activation bytes (BF16) one token leaves saved for backward in every layer of one
// tensor-parallel rank, under the layout's recomputation and precision.
double activation_bytes_per_token(const ModelConfig& m, const Layout& l);

// Empty when the layout can run this model on this cluster, else what is wrong and what fits.
std::string layout_problem(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l);
// Requires layout_problem() to be empty.
// o: the experiment's optimizer (AdamW unless it names Muon).
Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       const OptimizerPlan& o = {});
// The same, reusing `timings` across calls (the search). With only_if_fits, a layout whose
// weights and optimizer state alone overflow memory returns at once, untimed, with fits = false.
Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       ScheduleTimings& timings, bool only_if_fits, const OptimizerPlan& o = {});

}  // namespace mt::plan
