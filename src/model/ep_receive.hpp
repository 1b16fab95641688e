#pragma once
// The rows an expert-parallel rank keeps room for in one MoE layer's pass: what the all-to-all can
// bring to its experts. The dispatcher reserves them (model/token_dispatch.cpp) and the storage
// model counts them (parallel/storage_model.cpp) through the same function, so the memory
// pre-check and `moetrain plan` report what a run reserves.
namespace mt {

struct EpReceive {
  int ep = 1, experts = 0, top_k = 0;
  // parallel.ep_receive_bound: room for this many times the average arrivals; 0: the worst case.
  double bound = 0;
};

// The most rows that can arrive: each of the ep ranks routes `tokens` tokens, each token's top_k
// experts are distinct, so at most min(top_k, local experts) of its rows come to one rank.
// DeepSeek-V3's node-limited routing (n_groups, topk_groups) lowers none of it: the token's chosen
// groups may all be this rank's.
long ep_worst_rows(const EpReceive& r, int tokens);
// What each rank receives on average: every rank sends tokens x top_k rows, spread over the ranks.
long ep_average_rows(const EpReceive& r, int tokens);
// The rows reserved: the worst case, or `bound` times the average, rounded up and at most the worst.
long ep_reserved_rows(const EpReceive& r, int tokens);
// The bound (in multiples of the average, rounded up to hundredths) that `rows` arrivals need.
double ep_bound_for(const EpReceive& r, int tokens, long rows);

}  // namespace mt
