#pragma once
// The whole network: embedding, blocks, final RMSNorm, output head and cross-entropy.
// Each micro-batch runs in a slot: forward() saves what it needs in the slot's arena,
// backward_input() propagates the loss gradient to every layer's input, backward_weight()
// adds the weight gradients, retire() frees the slot.
// Multi-token prediction (report eqs. 21-25): module k (1..D) combines the previous depth's
// hidden state h^{k-1} (h^0: the last block's output) with the embedding of token i+k,
//   h'_i = W_proj [RMSNorm(h^{k-1}_i); RMSNorm(Emb(t_{i+k}))],  h^k = Block_k(h'),
// and predicts token i+k+1 through its own final RMSNorm and the shared output head. Positions
// i >= seq_len - k have no such token: they see token 0 and carry no loss. Slots are independent, so a schedule may
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
  float mtp = 0.0f;  // lambda / (D * sequences in the global batch); depth k divides by seq_len - k
};

struct ForwardResult {
  double ce_sum = 0;    // summed over the micro-batch's tokens
  double aux_sum = 0;   // the micro-batch's balance-loss term of the objective, all layers
  long tokens = 0;
  std::vector<double> mtp_ce_sums;  // per MTP depth, cross-entropy summed over its valid positions
};

class Model {
 public:
  // `shard`: the slice of each layer this rank holds (the whole model by default).
  Model(const ModelConfig& cfg, uint64_t seed, const Backend& backend, GemmInputs gemm_inputs, int max_in_flight,
        const ShardPlace& shard = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ForwardResult forward(int slot, const MicroBatch& mb, const LossScales& scales);
  void backward_input(int slot);
  void backward_weight(int slot);
  void retire(int slot) { arenas_[slot].reset(); }
  // The output logits [batch*seq, vocab] of the slot's last forward (valid until retire).
  const float* logits(int slot) const { return saved_[slot].logits; }

  std::vector<MoE*> moe_layers();
  const ModelConfig& config() const { return cfg_; }
  size_t arena_bytes() const;

  ParamStore params;
  int embedding, final_norm, head;
  struct MtpModule {
    int hidden_norm, embed_norm, proj, out_norm;  // [d], [d], [d, 2d], [d]
    std::unique_ptr<Block> block;
  };
  std::vector<MtpModule> mtp;

 private:
  struct Saved {
    int rows = 0;
    const int* inputs = nullptr;
    std::vector<float*> acts;  // block inputs; acts[n_layers] is the last block's output
    float *normed = nullptr, *rstd = nullptr, *logits = nullptr, *dlogits = nullptr, *dnormed = nullptr;
    std::vector<float*> grads;  // gradient w.r.t. each block input (grads[0] feeds the embedding)
    struct Mtp {
      const float* h_prev = nullptr;
      int* tokens = nullptr;
      float *emb = nullptr, *a = nullptr, *a_rstd = nullptr, *b = nullptr, *b_rstd = nullptr, *cat = nullptr;
      float *hp = nullptr, *h = nullptr, *n = nullptr, *n_rstd = nullptr, *dlogits = nullptr;
      float *dn = nullptr, *dh = nullptr, *dhp = nullptr, *da = nullptr, *db = nullptr, *demb = nullptr;
    };
    std::vector<Mtp> mtp;
  };
  // Forward of MTP module k (0-based) of a micro-batch; returns its summed cross-entropy.
  double mtp_forward(int slot, int k, const MicroBatch& mb, const LossScales& scales, double* aux);
  // Backward of module k; dh_next is the gradient w.r.t. its output from module k+1 (or null).
  // Returns the gradient w.r.t. its input hidden state.
  float* mtp_backward_input(int slot, int k, const float* dh_next);
  void mtp_backward_weight(int slot, int k);
  ModelConfig cfg_;
  LayerEnv env_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<Arena> arenas_;
  std::vector<Saved> saved_;
};

}  // namespace mt
