// Compute per micro-batch and piece. Units: seconds, FLOPs, bytes.
#include "plan/chunk_compute.hpp"

#include <algorithm>

#include "model/flops.hpp"
#include "plan/cost_model.hpp"

namespace mt::plan {

namespace {

// Values per token entering (in) and leaving (out) the FP8 GEMMs of one layer on one
// tensor-parallel rank. Each rank quantizes its whole input; the MoE sees 1/tp of the tokens.
struct Fp8Values {
  double in = 0, out = 0;
};
Fp8Values fp8_values(const ModelConfig& m, bool moe, int tp) {
  const auto& a = m.attention;
  const double d = m.d_model, H = double(m.n_heads) / tp;
  Fp8Values v;
  auto gemm = [&](double in, double out) { v.in += in, v.out += out; };
  if (a.kind == AttentionKind::mla) {
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0)
      gemm(d, a.q_lora_rank), gemm(a.q_lora_rank, H * qk);
    else
      gemm(d, H * qk);
    gemm(d, a.kv_lora_rank + a.qk_rope_head_dim);
    gemm(a.kv_lora_rank, H * (a.qk_nope_head_dim + a.v_head_dim));
    gemm(H * a.v_head_dim, d);
  } else {
    const double kv = double(a.n_kv_heads ? a.n_kv_heads : m.n_heads) / tp;
    gemm(d, (H + 2 * kv) * m.head_dim);
    gemm(H * m.head_dim, d);
  }
  if (moe) {
    const double copies = double(m.moe.top_k + m.moe.n_shared_experts) / tp, h = m.moe.expert_hidden;
    gemm(copies * d, copies * 2 * h);
    gemm(copies * h, copies * d);
  } else {
    const double f = double(m.ffn_hidden) / tp;
    gemm(d, 2 * f);
    gemm(f, d);
  }
  return v;
}

}  // namespace

double rows_per_expert(const ModelConfig& m, const Layout& l, double tokens) {
  if (moe_layer_count(m) == 0) return 0;
  return tokens / l.tp * m.moe.top_k * l.ep / m.moe.n_routed_experts;
}

double gemm_roofline(double rows, double k, double n, double operand_bytes, double rate, double bandwidth) {
  if (rows <= 0) return 1;
  const double flops = 2 * rows * k * n;
  // Operands read once, the BF16 output written once.
  const double bytes = operand_bytes * (rows * k + k * n) + 2 * rows * n;
  return std::min(1.0, (flops / bytes) / (rate / bandwidth));
}

ChunkCompute chunk_compute(const ModelConfig& m, const Cluster& c, const Layout& l, double tokens, int pieces) {
  const double d = m.d_model, V = m.vocab_size;
  // FLOPs per token, forward, whole model, by kernel class.
  const double core = attention_core_forward_flops_per_token(m);
  const double heads = 2 * d * V * (1 + m.mtp.depth);
  const double routed = moe_layer_count(m) > 0
                            ? double(moe_layer_count(m)) * 6 * d * m.moe.expert_hidden * m.moe.top_k
                            : 0.0;
  const double linear = training_flops_per_token(m) / 3 - core - heads - routed;

  const double bf16 = c.accel.bf16_flops * c.matmul_efficiency_bf16;
  const double rate = l.fp8 ? c.accel.fp8_flops * c.matmul_efficiency_fp8 : bf16;
  const double per_rank = tokens / l.tp / pieces;  // this rank's share of the model's per-token work
  const double experts_efficiency = gemm_roofline(rows_per_expert(m, l, tokens), d, 2.0 * m.moe.expert_hidden,
                                                  l.fp8 ? 1 : 2, rate, c.accel.hbm_bandwidth);

  ChunkCompute out;
  out.linear_gemms = per_rank * linear / rate;
  const double gemms = out.linear_gemms + per_rank * routed / (rate * experts_efficiency) + per_rank * heads / bf16;
  out.attention = per_rank * core / bf16;

  // Memory-bound work moves the layer's activations `activation_passes` times over HBM per step
  // (a third forward, two thirds backward); without a fused attention kernel the score matrix
  // adds Korthikanti et al. 2022's 5*a*s bytes per token and layer.
  Layout unrecomputed = l;
  unrecomputed.recompute = Recompute::none;
  double moved = activation_bytes_per_token(m, unrecomputed);
  if (c.attention_materialized) moved += 5.0 * m.n_heads * m.seq_len * (m.n_layers + m.mtp.depth) / l.tp;
  const double traffic = c.activation_passes * tokens * moved / pieces / c.accel.hbm_bandwidth;

  // FP8: the forward quantizes each FP8 GEMM's BF16 input, the backward its output gradient, at
  // the recipe's bytes per value (fp8_recipe.hpp).
  double quant_f = 0, quant_b = 0;
  if (l.fp8) {
    const int moe_blocks = moe_layer_count(m), dense_blocks = m.n_layers + m.mtp.depth - moe_blocks;
    const Fp8Values dense = fp8_values(m, false, l.tp), moe = fp8_values(m, true, l.tp);
    const double per_value = quantization_bytes(c.fp8_recipe) * tokens / pieces / c.accel.hbm_bandwidth;
    quant_f = per_value * (dense_blocks * dense.in + moe_blocks * moe.in);
    quant_b = per_value * (dense_blocks * dense.out + moe_blocks * moe.out);
  }

  // A fused attention kernel keeps no score matrix, so its backward computes it again: five
  // matrix multiplies against the forward's two (Dao 2023, FlashAttention-2, arXiv 2307.08691).
  const double attention_backward = (c.attention_materialized ? 2.0 : 2.5) * out.attention;
  out.forward = gemms + out.attention + traffic / 3 + quant_f;
  out.weight_grad = gemms;
  out.backward = 2 * gemms + attention_backward + 2 * traffic / 3 + quant_b;
  return out;
}

}  // namespace mt::plan
