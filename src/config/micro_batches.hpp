#pragma once
// How a step's sequences split: each data-parallel rank runs global_batch / dp of them, in
// micro-batches of micro_batch (validation checks that both divide).
namespace mt {

inline int micro_batches_per_rank(int global_batch, int micro_batch, int dp) { return global_batch / micro_batch / dp; }

}  // namespace mt
