#include "model/attention.hpp"

#include "model/mha.hpp"
#include "model/mla.hpp"

namespace mt {

std::unique_ptr<AttentionLayer> make_attention(const LayerEnv& env, const ModelConfig& cfg, const std::string& prefix,
                                               int max_in_flight) {
  if (cfg.attention.kind == AttentionKind::mla) return std::make_unique<Mla>(env, cfg, prefix, max_in_flight);
  return std::make_unique<Mha>(env, cfg, prefix, max_in_flight);
}

void copy_block(const Backend& be, int rows, int width, const float* src, int src_stride, int src_col, float* dst,
                int dst_stride, int dst_col, bool accumulate) {
  be.copy_columns({.rows = rows, .cols = width, .src = src + src_col, .src_stride = src_stride,
                   .dst = dst + dst_col, .dst_stride = dst_stride, .accumulate = accumulate});
}

void copy_block(const Backend& be, int rows, int width, const float* src, int src_stride, int src_col, Bf16* dst,
                int dst_stride, int dst_col) {
  be.copy_columns({.rows = rows, .cols = width, .src = src + src_col, .src_stride = src_stride,
                   .dst_stride = dst_stride, .dst_bf16 = dst + dst_col});
}

void copy_heads(const Backend& be, CopyColumnsArgs a, float* dst) {
  a.dst = dst;
  be.copy_columns(a);
}

void copy_heads(const Backend& be, CopyColumnsArgs a, Bf16* dst) {
  a.dst_bf16 = dst;
  be.copy_columns(a);
}

}  // namespace mt
