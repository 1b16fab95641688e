#pragma once
// The storage moetrain's trainer allocates on the busiest rank of a layout (weights, gradients,
// optimizer state, activation arenas), counted from the model's shapes without allocating it:
// the host memory pre-check, the GPU fit check and the planner's estimate all read it.
#include "config/config.hpp"
#include "config/precision.hpp"
#include "parallel/layout.hpp"
#include "pipeline/schedule.hpp"

namespace mt {

// What a run's [precision] keeps in bfloat16, as the storage model counts it.
inline Storage storage_of(const PrecisionConfig& p) {
  if (bf16_outputs(p)) return Storage::mixed_bf16_outputs;
  return bf16_activations(p) ? Storage::mixed : Storage::fp32;
}

// Bytes per rank.
struct RankMemory {
  double weights = 0, grads = 0, optimizer = 0, activations = 0;
  double prepared = 0;  // the weights as GEMMs read them (model/prepared_weights.hpp)
  // Of the activations: what room for the expert-parallel arrivals parallel.ep_receive_bound
  // reserves (model/ep_receive.hpp) costs over room for the average arrivals.
  double ep_headroom = 0;
  double total() const { return weights + grads + optimizer + activations + prepared; }
};

// Where the layout's schedule puts the model's pieces: stages = pieces the model is cut into,
// chunks_per_rank = pieces one rank holds (DualPipe's two copies included). Without a schedule,
// one piece on every rank.
pipeline::Placement placement_of(const Layout& l);

// The output heads' logits (their gradient in place) of a micro-batch of `tokens` on a rank, in
// values (model/head_loss.hpp): with model.head_chunk_tokens, one chunk's [chunk, vocab] at a time
// for the main and every MTP head, in the scratch arena; with 0, each head's whole [tokens, vocab],
// kept in the micro-batch's arena until its backward. moetrain's storage and the planner's BF16
// recipe (plan/memory_model.cpp) both count them so.
struct HeadLogits {
  double per_microbatch = 0;  // in every micro-batch's arena
  double once = 0;            // in the scratch arena
};
HeadLogits head_logits_values(const ModelConfig& m, double tokens);

// moetrain's own storage per rank (l.storage fp32 or mixed): weights, gradients, optimizer state
// and the activation arenas' high water, without timing anything. `prepared_bytes`: what each
// element of a weight that GEMMs read costs again in its prepared forms (0: none are kept).
// The rows a MoE layer's experts keep room for per token of a micro-batch's rank share: top_k
// with one expert-parallel rank, else the reserved arrivals (model/ep_receive.hpp) per token.
double ep_rows_per_token(const ModelConfig& m, const Layout& l);

RankMemory trainer_memory(const ModelConfig& m, int global_batch, const Layout& l, double prepared_bytes = 0);

}  // namespace mt
