#pragma once
// A layout by name (Layout: what `moetrain plan` proposes and `moetrain train` runs, printed and
// parsed the same way by both), and where each rank of a run sits (ParallelLayout).
// Where each rank of a run sits. World ranks fill tensor-parallel positions first, then data
// parallel ones, then pipeline stages:  rank = tp + TP * (dp + DP * pp),  so a tensor-parallel
// group is the nearest ranks (one node on a real cluster) and a stage is a contiguous block.
// Routed experts spread over ep ranks among the DP*TP ranks of a stage (as in DeepSeek-V3):
// the stage position s = tp + TP * dp gives expert-parallel rank s % EP in group s / EP; ranks
// with the same expert-parallel rank in different groups hold the same experts (replicas).
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/kind.hpp"

namespace mt {

// Whose memory the model counts. bf16_recipe: DeepSeek-V3's (BF16 weights and activations, FP8
// FFN inputs under FP8, FP32 master weights, gradients and AdamW moments). fp32: moetrain's own
// trainer as it allocates today: everything FP32 (the weights are their own master copy), each
// block's tensors as src/model keeps them, one block's backward work per chunk, logits and their
// gradient. `mixed` is the same trainer under bf16 GEMMs, keeping what only GEMMs read (normed
// block inputs, SwiGLU products) in bfloat16 (precision.bf16_activations); `mixed_bf16_outputs` also
// the GEMM outputs only SwiGLU reads (precision.bf16_outputs). Time does not depend on it.
enum class Storage { bf16_recipe, fp32, mixed, mixed_bf16_outputs };
template <>
struct Names<Storage> {
  static constexpr std::array<std::pair<const char*, Storage>, 4> list{
      {{"bf16", Storage::bf16_recipe}, {"fp32", Storage::fp32}, {"mixed", Storage::mixed},
       {"mixed_bf16_outputs", Storage::mixed_bf16_outputs}}};
};

struct Layout {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int vpp = 1;                    // interleaved only
  int zero = 1;                   // 0 all-reduce; 1 optimizer sharded; 2 + gradients; 3 FSDP (+ parameters)
  pipeline::Kind schedule = pipeline::Kind::one_f_one_b;  // with pp == 1: 1f1b (plain) or dualpipev
  int micro_batch = 1;            // sequences per micro-batch
  Recompute recompute = Recompute::none;
  bool fp8 = false;
  bool sp = false;                // sequence parallelism (tp > 1 only)
  Storage storage = Storage::bf16_recipe;
  // Context parallelism: each sequence's tokens split over cp ranks (ring attention passes keys
  // and values around them). The planner models it, its ranks next after the tensor-parallel
  // ones (rank = tp + TP * (cp + CP * (dp + DP * pp))); the trainer does not run it yet.
  int cp = 1;
  // parallel.ep_receive_bound: the room an expert-parallel rank keeps for arrivals (0: the worst case).
  // Not part of the layout's text: the experiment sets it, and the planner's search does not vary it.
  double ep_receive_bound = 0;
  // fp8.fused_codes under FP8: the bytes each value RMSNorm and SwiGLU hand to GEMMs keeps beside it
  // as its E4M3 code and share of a 1 x tile scale (1 + 4 / tile); 0 when none are kept. Set, like
  // ep_receive_bound, by the experiment.
  double fp8_code_bytes = 0;
  int world() const { return dp * tp * cp * pp; }
  // Whether micro-batches run as a schedule of chunks: always with a pipeline; with pp == 1 only
  // for DualPipeV, whose two half-model chunks on one rank overlap one micro-batch's
  // communication with another's compute. Otherwise micro-batches run one after another.
  bool scheduled() const { return pp > 1 || schedule == pipeline::Kind::dualpipev; }
};

// "dp=128 tp=1 pp=16 ep=64 dualpipe zero=1 mbs=1 recompute=none fp8" (" sp" after the tp
// sizes with sequence parallelism, " cp=N" after them with context parallelism, " storage=fp32"
// at the end): how
// plan prints a layout, and how checkpoints and logs record the one they ran.
std::string layout_text(const Layout& l);
// Parses "tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on[,sp=on][,vpp=2]
// [,dp=128][,storage=fp32]", and layout_text's own form too (entries apart by spaces, the schedule
// by its name alone, "fp8" and "sp" alone), so a layout a run recorded can be planned again as it is.
// dp defaults to gpus / (tp * cp * pp). Throws UserError naming the bad entry.
Layout parse_layout(const std::string& text, int gpus);

// "parallel.dp=512", "parallel.schedule=dualpipev", ..., "precision.matmul=fp8": every key of the
// layout, so nothing is left to the experiment file's own [parallel] table.
std::vector<std::string> train_sets(const Layout& l);
// "--set parallel.dp=512 --set ..." (no value needs shell quoting).
std::string train_set_line(const Layout& l);
// The layout of a training config: its [parallel] table, micro-batch, recomputation and FP8.
Layout layout_of_config(const Config& c);
// Layout::fp8_code_bytes of an FP8 run: 1 + 4 / fp8.tile, or 0 when fp8.fused_codes is off or the
// scaling is per tensor (the GEMMs quantize what they read then; LayerEnv::fp8_row_codes).
double fp8_code_bytes(const Fp8Config& f);


struct ParallelLayout {
  int dp = 1, tp = 1, pp = 1, ep = 1;
  // DualPipe: pipeline rank r holds the stages of rank pp-1-r too (the other direction), so the
  // pair sums everything they hold.
  bool mirrored = false;
  // The first and last stages live on pipeline ranks 0 and pp-1 and both hold the embedding
  // (the last for multi-token prediction): the two copies sum their gradients.
  bool tied_embedding = false;
  int world() const { return dp * tp * pp; }
  int stage_ranks() const { return dp * tp; }
};

struct RankCoords {
  int rank = 0, tp = 0, dp = 0, pp = 0;
  int ep = 0, ep_group = 0;  // expert-parallel rank and which replica group of experts
};

// The layout an experiment's [parallel] table describes.
ParallelLayout layout_of(const ParallelConfig& parallel, const ModelConfig& model);
RankCoords coords_of(const ParallelLayout& layout, int rank);
// One line per rank: "rank 3: tp 1 dp 1 pp 0 ep 1 (experts 4-7)" (the first 16 of a job of
// more than 64).
std::string placement_text(const ParallelLayout& layout, int n_experts);

}  // namespace mt
