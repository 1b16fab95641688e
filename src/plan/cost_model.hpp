#pragma once
// One training step of a model under a parallel layout on a cluster: compute per pipeline chunk
// from FLOPs and efficiency, communication on the link each collective crosses, overlap as the
// schedule allows, the bubble from the schedule simulator, and memory per rank.
#include <string>

#include "config/config.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/simulate.hpp"
#include "plan/cluster.hpp"
#include "plan/schedule_timings.hpp"

namespace mt::plan {

// Whose memory the model counts. bf16_recipe: DeepSeek-V3's (BF16 weights and activations, FP8
// FFN inputs under FP8, FP32 master weights, gradients and AdamW moments). fp32: moetrain's own
// trainer as it allocates today: everything FP32 (the weights are their own master copy), each
// block's tensors as src/model keeps them, one block's backward work per chunk, logits and their
// gradient. Time does not depend on it.
enum class Storage { bf16_recipe, fp32 };

struct Layout {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int vpp = 1;                    // interleaved only
  int zero = 1;                   // 0 all-reduce; 1 optimizer sharded; 2 + gradients; 3 FSDP (+ parameters)
  pipeline::Kind schedule = pipeline::Kind::one_f_one_b;  // with pp == 1: 1f1b (plain) or dualpipev
  int micro_batch = 1;            // sequences per micro-batch
  Recompute recompute = Recompute::none;
  bool fp8 = false;
  Storage storage = Storage::bf16_recipe;
  int world() const { return dp * tp * pp; }
  // Whether micro-batches run as a schedule of chunks: always with a pipeline; with pp == 1 only
  // for DualPipeV, whose two half-model chunks on one rank overlap one micro-batch's
  // communication with another's compute. Otherwise micro-batches run one after another.
  bool scheduled() const { return pp > 1 || schedule == pipeline::Kind::dualpipev; }
};

// "dp=128 tp=1 pp=16 ep=64 dualpipe zero=1 mbs=1 recompute=none fp8" (and " storage=fp32")
std::string layout_text(const Layout& l);
// Parses "tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on[,vpp=2][,dp=128]
// [,storage=fp32]";
// dp defaults to gpus / (tp * pp). Throws UserError naming the bad entry.
Layout parse_layout(const std::string& text, int gpus);

struct Memory {
  double weights = 0, grads = 0, optimizer = 0, activations = 0;
  double total() const { return weights + grads + optimizer + activations; }
};

// Seconds per step, each part exposed on the critical path (they sum to the step time).
struct Breakdown {
  double compute = 0;
  double tp = 0, ep = 0;  // exposed tensor- and expert-parallel communication
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
Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l);
// The same, reusing `timings` across calls (the search). With only_if_fits, a layout whose
// weights and optimizer state alone overflow memory returns at once, untimed, with fits = false.
Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       ScheduleTimings& timings, bool only_if_fits);

}  // namespace mt::plan
