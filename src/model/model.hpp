#pragma once
// The whole network: embedding, blocks, final RMSNorm, output head and cross-entropy.
// Each micro-batch runs in a slot: forward() saves what it needs in the slot's arena,
// backward_input() propagates the loss gradient to every layer's input, backward_weight()
// adds the weight gradients, retire() frees the slot. Slots are independent, so a schedule may
// keep several micro-batches in flight and run weight gradients late.
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "model/block.hpp"

namespace mt {

struct MicroBatch {
  const int* inputs = nullptr;   // [batch*seq] token ids
  const int* targets = nullptr;  // [batch*seq] next tokens (negative: ignored)
  int batch = 0;
};

// Weights in the objective for one micro-batch: the objective is the mean cross-entropy over
// the global batch's tokens plus the balance loss averaged over the step's balance groups.
struct LossScales {
  float ce = 1.0f;   // 1 / tokens in the global batch
  float aux = 1.0f;  // 1 / balance groups in the global batch (sequences, micro-batches or 1)
};

struct ForwardResult {
  double ce_sum = 0;    // summed over the micro-batch's tokens
  double aux_sum = 0;   // the micro-batch's balance-loss term of the objective, all layers
  long tokens = 0;
};

class Model {
 public:
  Model(const ModelConfig& cfg, uint64_t seed, const Backend& backend, GemmInputs gemm_inputs, int max_in_flight);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ForwardResult forward(int slot, const MicroBatch& mb, const LossScales& scales);
  void backward_input(int slot);
  void backward_weight(int slot);
  void retire(int slot) { arenas_[slot].reset(); }

  std::vector<MoE*> moe_layers();
  const ModelConfig& config() const { return cfg_; }
  size_t arena_bytes() const;

  ParamStore params;
  int embedding, final_norm, head;

 private:
  struct Saved {
    int rows = 0;
    const int* inputs = nullptr;
    std::vector<float*> acts;  // block inputs; acts[n_layers] is the last block's output
    float *normed = nullptr, *rstd = nullptr, *dlogits = nullptr, *dnormed = nullptr;
    std::vector<float*> grads;  // gradient w.r.t. each block input (grads[0] feeds the embedding)
  };
  ModelConfig cfg_;
  LayerEnv env_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<Arena> arenas_;
  std::vector<Saved> saved_;
};

}  // namespace mt
