#pragma once
// Moves a micro-batch's (token, expert) rows to their experts and back. The rows are first
// grouped by expert (a stable counting sort on the device); the experts' grouped GEMMs read the
// groups' offsets from device memory, so with one expert-parallel rank the host never waits.
// Under expert parallelism a rank holds experts [ep_rank * E/ep, (ep_rank+1) * E/ep): the
// per-expert counts travel first through the host (it sizes the exchange: one download, one
// all-to-all of E ints and one upload per MoE layer and forward pass), then the rows by
// all-to-all-v; they arrive grouped by (source, local expert), are put in (local expert, source)
// order for the grouped GEMMs (moe_arrivals builds that order on the device), and go back the
// same way. Every row is kept: no capacity limit, no dropping; the arena keeps room for the most
// rows that can arrive (or parallel.ep_receive_bound's share of them: model/ep_receive.hpp), so its
// layout stays the same step after step; a pass that brings more grows that room (reserve()). With FP8 GEMMs the rows
// go out as FP8 codes with their 1 x tile scales, as DeepSeek-V3 dispatches (the expert's first
// GEMM quantizes them the same way, so the result is unchanged); results come back in fp32.
#include <functional>
#include <memory>
#include <vector>

#include "model/grouped_experts.hpp"
#include "model/layer_env.hpp"

namespace mt {

struct DispatchSaved {
  int pairs = 0;                 // tokens * top_k
  int* expert_begin = nullptr;   // [E + 1] the permuted rows of each expert
  int* perm_token = nullptr;     // [pairs] token of each permuted row
  int* slot_row = nullptr;       // [pairs] permuted row of (token, k)
  // The rows this rank's experts compute on, their offsets on the device (expert_begin itself
  // with one expert-parallel rank).
  ExpertRows rows;
  // Expert parallelism only.
  std::vector<int> send_values, recv_values;  // per peer, floats (rows * d_model)
  int* local_of = nullptr;                    // [rows.count] arriving row -> local row
  int* arrival_of = nullptr;                  // [rows.count] local row -> arriving row
};

// The experts' computation on rows grouped by local expert: out[rows.count] from in.
using ExpertsFn = std::function<void(GemmOperand in, const ExpertRows& rows, float* out)>;

class TokenDispatcher {
 public:
  TokenDispatcher(const LayerEnv& env, int d_model, int experts, int top_k);
  // Groups the routed pairs by expert (adding the counts to load) and returns x's rows in that
  // order [tokens * top_k, d_model]: only the experts' GEMMs read them, so in bfloat16 under
  // LayerEnv::bf16_activations (and they travel so under expert parallelism, half the bytes).
  GemmOperand permute(Arena& arena, const int* chosen, int tokens, const float* x, double* load, DispatchSaved& s);
  // out (permuted order) = experts(in) wherever each row's expert lives; `meanwhile` runs while
  // the rows travel; `fp8_rows`: they travel in FP8 (the forward dispatch under FP8 GEMMs).
  void exchange(Arena& arena, const DispatchSaved& s, GemmOperand in, float* out, const ExpertsFn& experts,
                const std::function<void()>& meanwhile, bool fp8_rows = false) const;
  int local_experts() const { return experts_ / env_.shard.ep_size; }

 private:
  void plan(Arena& arena, int tokens, DispatchSaved& s);
  // The rows to keep room for when rows_in arrive: parallel.ep_receive_bound's, or more if they do not fit.
  int reserve(int tokens, int rows_in);
  LayerEnv env_;
  int d_, experts_, top_k_;
  long grown_ = 0;  // the room an earlier pass's arrivals grew to (0: none did)
};

}  // namespace mt
