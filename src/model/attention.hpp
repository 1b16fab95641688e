#pragma once
// The attention interface of a block, and the factory that picks the kind from the config:
// multi-head attention with RoPE and optional grouped-query heads (mha.hpp), or DeepSeek's
// multi-head latent attention (mla.hpp).
#include <memory>
#include <string>

#include "config/config.hpp"
#include "model/layer_env.hpp"

namespace mt {

class AttentionLayer {
 public:
  virtual ~AttentionLayer() = default;
  // x, y: [batch*seq, d_model]; only GEMMs read x; y fp32, or bfloat16 (the output projection rounding).
  // What selective recomputation drops goes to `redo` (the same arena as `arena` without it); what
  // only this forward reads (projections that attention reads in a rotated, rounded or per-head
  // copy) goes to `temp`, which the next block's forward reuses.
  virtual void forward(int slot, Arena& arena, Arena& redo, Arena& temp, GemmOperand x, int batch, LayerOutput y) = 0;
  // Selective recomputation: what forward put in `redo`, computed again there after it was reset
  // (its temporaries too); x is the input's recomputed copy.
  virtual void redo(int slot, Arena& redo, GemmOperand x) = 0;
  // dy_codes: dy's FP8 codes written by its producer (codes null: none), for the output projection's Dgrad.
  virtual void backward_input(int slot, Arena& arena, const float* dy, float* dx, const Fp8Codes& dy_codes) = 0;
  virtual void backward_weight(int slot) = 0;
  // QK-Clip: each forward max-accumulates this rank's heads' largest logits into per_head (device
  // memory, AttentionForwardArgs::max_logit); null (the default) computes nothing.
  void set_max_logit(float* per_head) { max_logit_ = per_head; }

 protected:
  float* max_logit_ = nullptr;
};

std::unique_ptr<AttentionLayer> make_attention(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix,
                                               int max_in_flight);

// Copies `width` columns starting at `src_col` of every row of src (row stride src_stride) into
// dst at `dst_col` (row stride dst_stride); accumulate adds instead.
void copy_block(const Backend& be, int rows, int width, const float* src, int src_stride, int src_col, float* dst,
                int dst_stride, int dst_col, bool accumulate = false);
// The same into a bfloat16 destination, rounding.
void copy_block(const Backend& be, int rows, int width, const float* src, int src_stride, int src_col, Bf16* dst,
                int dst_stride, int dst_col);
// `a` (every head in one op) into dst, fp32 or bfloat16 (rounding).
void copy_heads(const Backend& be, CopyColumnsArgs a, float* dst);
void copy_heads(const Backend& be, CopyColumnsArgs a, Bf16* dst);

}  // namespace mt
