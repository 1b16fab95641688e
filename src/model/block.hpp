#pragma once
// One transformer block: x -> x + Attn(RMSNorm(x)) -> (that) + FFN(RMSNorm(that)), where FFN is
// a dense SwiGLU for the first n_dense_layers blocks and an MoE for the others.
// Under tensor parallelism the attention and the dense FFN each end in a sum over the group
// (forward: their outputs; backward: their input gradients), so the block's input and output
// are whole on every rank. The MoE splits the tokens over the group instead (model/moe.hpp).
// With sequence parallelism (ShardPlace::split_rows) the block's input, output, residual adds
// and norms hold this rank's share of the rows: the normed rows are all-gathered before attention
// and the FFN, whose sums are reduce-scattered back onto the share (Korthikanti et al. 2022).
#include <memory>
#include <string>
#include <vector>

#include "model/attention.hpp"
#include "model/moe.hpp"
#include "model/swiglu_ffn.hpp"

namespace mt {

class Block {
 public:
  // Parameters are named "<prefix>.attn_norm" and so on; `moe` picks the MoE FFN.
  Block(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix, bool moe, int max_in_flight);
  // Adds the balance loss of this micro-batch to *aux_sum (device memory; null, and dense blocks:
  // nothing). `recompute`: the same
  // forward again before the backward (training.recompute = "full"): the step's statistics
  // (expert load) are not counted twice. What selective recomputation drops (the RMSNorm outputs,
  // the SwiGLU products, MLA's per-head queries, keys and values) goes to `redo`; without it,
  // pass `arena` twice. `temp`: what only this forward reads (AttentionLayer::forward), free once
  // it returns.
  void forward(int slot, Arena& arena, Arena& redo, Arena& temp, const float* x, int batch, float* y,
               float aux_grad_scale, double* aux_sum, bool recompute = false);
  // training.recompute = "selective": what forward put in `redo`, computed again there (after it
  // was reset) from what the block kept, bit for bit.
  void redo(int slot, Arena& redo);
  // dy_codes: dy's FP8 codes (gradient format) when the block above wrote them; dx_codes (codes
  // set): room for dx's, written with it for the block below (ops/fp8/row_codes.hpp).
  void backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8RowCodes& dy_codes = {},
                      const Fp8RowCodes& dx_codes = {});
  // Whether backward_input's GEMMs read dy's FP8 codes (the dense FFN's, or the shared experts', down
  // projection's Dgrad), so that the block above should write them.
  bool reads_output_codes() const;
  void backward_weight(int slot);

  MoE* moe() { return moe_.get(); }
  AttentionLayer& attention() { return *attn_; }
  int norm1, norm2, ffn_gate = -1, ffn_up = -1, ffn_down = -1;

 private:
  struct Saved {
    int rows = 0;
    const float* x = nullptr;
    GemmOperand n1, n2;  // the normed inputs of attention and FFN: only GEMMs read them (not the MoE's)
    float *rstd1 = nullptr, *x1 = nullptr, *rstd2 = nullptr;
    float *dn1 = nullptr, *dn2 = nullptr, *dx1 = nullptr;
    const float* dy = nullptr;
    SwigluSaved ffn;
  };
  SwigluWeights dense_weights() const;
  // RMSNorm(x) into `redo`, in bfloat16 when `gemms_only` read it and LayerEnv::bf16_activations.
  // x_bf16: x in bfloat16 (with a residual), in place of x.
  GemmOperand norm(Arena& redo, int rows, const float* x, int weight, float* rstd, bool gemms_only,
                 const float* residual = nullptr, float* sum = nullptr, const Bf16* x_bf16 = nullptr);
  // Whether the residual adds read the attention and dense FFN outputs in bfloat16 (written so by
  // their last GEMMs): LayerEnv::bf16_outputs without tensor parallelism, whose partial outputs are
  // summed in fp32 first. The residual stream itself stays fp32.
  bool bf16_residual_reads() const { return env_.bf16_outputs && env_.shard.tp_size == 1; }

  LayerEnv env_;
  int d_, seq_;
  float eps_;
  std::unique_ptr<AttentionLayer> attn_;
  std::unique_ptr<MoE> moe_;
  std::vector<Saved> saved_;
};

}  // namespace mt
