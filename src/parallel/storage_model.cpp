// moetrain's storage per rank, as src/model and train/optimizer.hpp allocate it. Units: bytes,
// values (4 bytes each in FP32).
#include "parallel/storage_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/ep_receive.hpp"
#include "model/flops.hpp"
#include "pipeline/generators.hpp"
#include "pipeline/simulate.hpp"

namespace mt {

using pipeline::Kind;

pipeline::Placement placement_of(const Layout& l) {
  if (!l.scheduled()) return pipeline::Placement{l.schedule, l.pp, 1, 1, 1, 1};
  return pipeline::placement_for({l.schedule, l.pp, 2 * l.pp, l.schedule == Kind::interleaved ? l.vpp : 1});
}

namespace {

// moetrain's Model (Storage::fp32), values per token on one tensor-parallel rank, as src/model
// allocates them: what a block keeps from forward to backward in its micro-batch's arena, the
// most its chunk's scratch arena holds while the block's backward runs, and the most it holds in
// the block's forward (temporaries: fp32 projections attention reads through a copy; under
// recomputation also what the block drops).
struct BlockValues {
  double kept = 0, work = 0, temp = 0;
};
// `half`: 0.5 where Storage::mixed keeps a tensor that only GEMMs read in bfloat16, else 1; `out_half`
// the same for the GEMM outputs only SwiGLU, RoPE and the residual adds read and the Dgrad outputs
// only SwiGLU's backward reads (Storage::mixed_bf16_outputs; the residual adds' without tensor parallelism).
// `sp`: sequence parallelism, the block's own rows 1/tp of them (model/block.hpp).
// `rows`: the rows a MoE layer's experts keep room for, per token of the rank's share (top_k with
// one expert-parallel rank; under ep > 1 the reserved arrivals, model/ep_receive.hpp).
// `codes`: values (4 bytes) of FP8 codes and scales that RMSNorm and SwiGLU write beside each value
// they give GEMMs (Layout::fp8_code_bytes / 4; LayerEnv::fp8_row_codes; the routed experts' too),
// SwiGLU's backward beside its two gradients and RMSNorm's beside the residual gradient (not for rows
// gathered first under sequence parallelism, nor the MoE's input), attention beside its output (in the
// scratch arena).
BlockValues moetrain_block(const ModelConfig& m, bool moe, Recompute recompute, int tp, int ep, double rows,
                           double half, double out_half, bool sp, double codes) {
  const auto& a = m.attention;
  const double d = m.d_model, H = double(m.n_heads) / tp, own = sp ? 1.0 / tp : 1.0;
  const double norms = half * d + (moe ? d : half * d);  // n1, n2 (the MoE's own rows move)
  double kept = own * (d + 2);  // x1, rstd1, rstd2
  double dropped = norms + (sp ? 0 : codes * (moe ? d : 2 * d));  // selective recomputation redoes them
  double back = own * 3 * d + (sp ? 0 : codes * d);  // dn2, dx1 (and its codes), dn1
  double temp = 0, redone = 0;  // the forward's temporaries; those selective recomputation makes again
  const bool outputs = out_half < 1;
  if (outputs && tp == 1) temp += out_half * (moe ? d : 2 * d);  // attention's (and a dense FFN's) output
  if (sp) {
    // The norms of the own rows before they are gathered (again under selective recomputation);
    // attention's output and a dense FFN's before they are reduce-scattered; in backward the
    // gathered gradient of each one's output and its input gradient before the reduce-scatter
    // (the MoE takes and gives the own rows).
    temp += own * norms + d + (moe ? 0 : d);
    redone += own * norms;
    back += moe ? 2 * d : 4 * d;
  }
  if (a.kind == AttentionKind::mla) {
    const double ql = a.q_lora_rank, kl = a.kv_lora_rank, rope = a.qk_rope_head_dim, nope = a.qk_nope_head_dim,
                 v = a.v_head_dim, qk = nope + rope;
    // c_q and its normed copy, c_kv, c and its normed copy (the copies only GEMMs read), o, lse
    kept += (ql > 0 ? (1 + half + codes) * ql + 1 : 0) + (kl + rope) + (1 + half + codes) * kl + 1 + H * v + H;
    dropped += half * (2 * H * qk + H * v);  // q, k, v per head: attention's inputs only
    // [k_nope; v], q before RoPE rounds it (a bfloat16 one under outputs), o's FP8 codes
    const double q_in = outputs ? out_half * H * qk : half < 1 ? H * qk : 0;
    temp += H * (nope + v) + q_in + codes * H * v;
    redone += H * (nope + v) + q_in;  // selective recomputation makes them again
    // dout, dq, dk (dv goes straight into the [k_nope; v] gradient), that gradient, dckv, dc_normed, dc
    back += H * v + 2 * H * qk + H * (nope + v) + (kl + rope) + 2 * kl + (ql > 0 ? 2 * ql : 0);
  } else {
    // Grouped key/value heads are read in place by their query heads: k and v per key/value head.
    const double hd = m.head_dim, kv = double(a.n_kv_heads ? a.n_kv_heads : m.n_heads) / tp;
    kept += (1 + half) * H * hd + H + 2 * half * kv * hd;  // q, o, lse, k and v
    // q, k, v before RoPE and the bfloat16 copies (under outputs q and k in bfloat16, v written so); o's codes
    temp += (outputs ? out_half * (H + kv) * hd : half < 1 ? H * hd + 2 * kv * hd : 0) + codes * H * hd;
    back += 2 * H * hd + 2 * kv * hd;                       // dout, dq, dk, dv

  }
  if (moe) {
    const double K = m.moe.top_k, R = rows, E = m.moe.n_routed_experts, hid = m.moe.expert_hidden,
                 shared = double(m.moe.n_shared_experts) * m.moe.expert_hidden;
    // The router keeps every token (scores, choices, gates; in backward its logits' and the gates'
    // gradients); the rest is this rank's 1/tp share of the tokens, with under tp > 1 its gates'
    // gradient, and without sequence parallelism its output and input gradient, before they are
    // gathered.
    const double share = 1.0 / tp, split = tp > 1 ? 1 : 0, gathered = tp > 1 && !sp ? 1 : 0;
    // The rows to the experts (bfloat16 under mixed storage) and back.
    // The experts' hidden values take room for R rows per token.
    // The routed and shared experts' gate and up outputs and hidden gradient (dh) may be bfloat16 (out_half).
    kept += E + 2 * K + share * (2 * K + (1 + half) * K * d + 2 * out_half * (R * hid + shared) + gathered * d);
    dropped += share * (half + codes) * (R * hid + shared);  // SwiGLU products (and their codes)
    back += E + K + share * (2 * K * d + (2 + out_half + 2 * codes) * (R * hid + shared) + split * K + gathered * d);
    // Expert parallelism: room for the rows arriving for this rank's experts, gathered into
    // expert order, their outputs and those going back (with their order both ways); the same
    // again for the gradients.
    if (ep > 1) kept += share * ((2 + 2 * half) * R * d + 2 * R), back += share * 4 * R * d;
  } else {
    const double hid = double(m.ffn_hidden) / tp;
    kept += 2 * out_half * hid;  // the gate and up outputs
    dropped += (half + codes) * hid;
    back += (2 + out_half + 2 * codes) * hid;  // dh (bfloat16 under outputs), the gate and up gradients
  }
  // Under recomputation the forward's scratch holds what it drops beside its temporaries; the
  // forward again (full, with its output) or its dropped part (selective) stays for the backward.
  if (recompute == Recompute::full) return {0, kept + dropped + temp + own * d + back, kept + dropped + temp};
  if (recompute == Recompute::selective) return {kept, dropped + redone + back, dropped + temp};
  return {kept + dropped, back, temp};
}

// moetrain's parameters on one rank of a pipeline position (stage): whole where the trainer keeps
// them whole (norms, MLA's latent projections, the router, shared experts: whole on every
// tensor-parallel rank), split over tp or ep where it splits them; and the MoE layers' router
// biases, which are weights without gradients. `experts`: the routed experts' part of `params`.
// `largest_group`: the most dense parameters whose gradients one piece of the backward completes
// together (a block, the head, the embedding, an MTP module's rest: Model::grad_groups);
// `largest_read`: the most whose values one piece of a pass reads (Model::value_groups: an MTP
// module reads the head and the embedding too).
// `partial`: those whole on every tensor-parallel rank whose gradient each rank gives a part of
// (Spread::tensor_partial: MLA's latent projections and norms, the shared experts, under sequence
// parallelism the blocks' norms).
struct StageParams {
  double params = 0, experts = 0, buffers = 0, largest_group = 0, largest_read = 0, partial = 0;
};
StageParams moetrain_stage_params(const ModelConfig& m, const Layout& l, int first, int end, bool has_embedding,
                                  bool last) {
  const auto& a = m.attention;
  const double d = m.d_model, V = m.vocab_size;
  StageParams s;
  auto layer = [&](bool moe) {
    double p = 2 * d;  // attention and FFN norms
    if (a.kind == AttentionKind::mla) {
      const double ql = a.q_lora_rank, kl = a.kv_lora_rank, rope = a.qk_rope_head_dim, qk = a.qk_nope_head_dim + rope;
      const double H = m.n_heads;
      p += (ql > 0 ? ql * d + ql + H * qk * ql / l.tp : H * qk * d / l.tp) + (kl + rope) * d + kl +
           H * (a.qk_nope_head_dim + a.v_head_dim) * kl / l.tp + d * H * a.v_head_dim / l.tp;
      s.partial += (ql > 0 ? ql * d + ql : 0) + (kl + rope) * d + kl;
    } else {
      p += attention_matmul_params(m) / l.tp;
    }
    double experts = 0;
    if (moe) {
      const double hid = m.moe.expert_hidden, E = m.moe.n_routed_experts;
      experts = 3 * hid * d * E / l.ep;
      p += E * d + 3.0 * m.moe.n_shared_experts * hid * d + experts;
      s.partial += 3.0 * m.moe.n_shared_experts * hid * d;
      s.experts += experts;
      s.buffers += E;
    } else {
      p += 3.0 * m.ffn_hidden * d / l.tp;
    }
    if (l.sp && l.tp > 1) s.partial += 2 * d;
    s.params += p;
    return p - experts;
  };
  auto group = [&](double dense) { s.largest_group = std::max(s.largest_group, dense); };
  auto read = [&](double dense) { s.largest_read = std::max(s.largest_read, dense); };
  for (int i = first; i < end; ++i) {
    const double block = layer(i >= m.n_dense_layers);
    group(block), read(block);
  }
  if (has_embedding) s.params += V * d, group(V * d), read(V * d);
  if (last) {
    s.params += V * d + d + m.mtp.depth * (2 * d * d + 3 * d);
    // The head with a norm; in chunks, with every MTP output norm too (the forward takes them together).
    group(V * d + d + (m.head_chunk_tokens > 0 ? m.mtp.depth * d : 0)), read(V * d + d);
    for (int k = 0; k < m.mtp.depth; ++k) {
      const double module = layer(m.n_layers > m.n_dense_layers) + 2 * d * d + 2 * d;
      group(module), group(V * d), read(module + d + 2 * V * d);
    }
  }
  return s;
}

// The gradients the optimizer sums across ranks through buffers of its own (Optimizer::
// allocate_step_buffers), in values: one for the largest of the sums over DualPipe's mirror pair
// (everything the rank holds), the tied embedding's two copies, the tensor-parallel partial
// gradients and without ZeRO the data-parallel dense ones, each parameter as its ZeRO piece; and
// one for the routed experts where other ranks hold replicas of them.
double summing_buffers(const ModelConfig& m, const Layout& l, const StageParams& all, bool holds_embedding) {
  const bool zero = l.zero >= 1 && l.dp > 1;
  auto piece = [&](double n) { return zero ? std::ceil(n / l.dp) : n; };
  const double dense = all.params - all.experts;
  double most = 0;
  if (l.schedule == Kind::dualpipe && l.pp > 1) most = piece(dense) + all.experts;
  if (holds_embedding && l.pp > 1 && m.mtp.depth > 0 && l.schedule != Kind::dualpipe &&
      l.schedule != Kind::dualpipev)
    most = std::max(most, piece(double(m.vocab_size) * m.d_model));
  if (l.tp > 1) most = std::max(most, piece(all.partial));
  if (!zero && l.dp > 1) most = std::max(most, dense);
  return most + (l.dp * l.tp > l.ep ? all.experts : 0);
}

// moetrain's weights, gradients and optimizer state on the rank that holds the most: FP32 weights
// (their own master copy), gradients and moments. ZeRO-1 cuts every parameter but the routed
// experts into dp pieces, keeps its piece's moments and packs the gradients for the
// reduce-scatter; ZeRO-2 keeps only the pieces' gradients, beside a window per chunk for the
// largest group and a packed buffer for the largest group's pieces (train/optimizer.hpp); ZeRO-3
// the pieces' weights too, beside a window per chunk for the largest group a pass reads.
// The GEMMs' prepared forms cost `prepared_bytes` per element of every weight but the embedding
// table (norms included: a few per layer), under ZeRO-3 of the routed experts only (the dense
// weights' values are lent to the passes, which convert them themselves).
RankMemory moetrain_memory(const ModelConfig& m, const Layout& l, const pipeline::Placement& placement,
                           double prepared_bytes) {
  const std::vector<int> cut = pipeline_cut(m, placement.stages);
  const bool zero1 = l.zero >= 1 && l.dp > 1, zero2 = l.zero >= 2 && l.dp > 1, zero3 = l.zero >= 3 && l.dp > 1;
  RankMemory most;
  for (int r = 0; r < placement.ranks; ++r) {
    StageParams all;
    double windows = 0, read_windows = 0, tables = 0;
    bool embedding = false, last = false;
    for (int c = 0; c < placement.chunks_per_rank; ++c) {
      const int pos = placement.locate(r, c)->position;
      embedding = embedding || pos == 0;
      tables += pos == 0 ? double(m.vocab_size) * m.d_model : 0;
      last = last || pos == placement.stages - 1;
      const StageParams s = moetrain_stage_params(m, l, cut[size_t(pos)], cut[size_t(pos) + 1], pos == 0,
                                                  pos == placement.stages - 1);
      all.params += s.params;
      all.experts += s.experts;
      all.buffers += s.buffers;
      all.partial += s.partial;
      all.largest_group = std::max(all.largest_group, s.largest_group);
      all.largest_read = std::max(all.largest_read, s.largest_read);
      windows += s.largest_group;
      read_windows += s.largest_read;
    }
    // The last stage's copy of the embedding (MTP) when another rank holds the first.
    if (last && !embedding && m.mtp.depth > 0) {
      all.params += double(m.vocab_size) * m.d_model;
      tables += double(m.vocab_size) * m.d_model;
    }
    const double dense = all.params - all.experts, shard = std::ceil(dense / l.dp);
    const double batch = std::ceil((zero3 ? std::max(all.largest_group, all.largest_read) : all.largest_group) / l.dp);
    RankMemory here;
    here.weights = 4 * (zero3 ? all.experts + shard + read_windows + all.buffers : all.params + all.buffers);
    here.grads = (zero2 ? 4 * (all.experts + shard + windows + (l.dp + 1) * batch) : 4 * all.params) +
                 4 * summing_buffers(m, l, all, embedding || (last && m.mtp.depth > 0));
    here.optimizer = zero2   ? 8 * (shard + all.experts)
                     : zero1 ? 8 * (shard + all.experts) + 4 * (dense + shard)
                             : 8 * all.params;
    here.prepared = prepared_bytes * (zero3 ? all.experts : all.params - tables);
    if (here.weights + here.grads + here.optimizer > most.weights + most.grads + most.optimizer) most = here;
  }
  return most;
}

// moetrain's activation values per token of one micro-batch on the busiest rank, as its arenas
// hold them: each chunk keeps one arena per micro-batch it has in flight at once (in the rank's
// compute order), each grown to the most one micro-batch needs, and one scratch arena.
double moetrain_activation_values(const ModelConfig& m, const Layout& l, const pipeline::Placement& placement,
                                  int microbatches, double expert_rows) {
  const bool outputs = l.storage == Storage::mixed_bf16_outputs;
  const double d = m.d_model, half = l.storage == Storage::mixed || outputs ? 0.5 : 1.0;
  const double out_half = outputs ? 0.5 : 1.0;
  const double codes = l.fp8 ? l.fp8_code_bytes / 4 : 0;
  const std::vector<int> cut = pipeline_cut(m, placement.stages);
  const bool mtp_moe = m.n_layers > m.n_dense_layers;
  pipeline::RankOrders order(size_t(placement.ranks));
  if (l.scheduled())
    order = pipeline::compute_order_for(
        {l.schedule, l.pp, microbatches, l.schedule == Kind::interleaved ? l.vpp : 1});
  else
    order[0] = {pipeline::ComputeOp{{pipeline::Pass::forward, 0, 0}, std::nullopt},
                pipeline::ComputeOp{{pipeline::Pass::backward, 0, 0}, std::nullopt}};
  double busiest = 0;
  for (int r = 0; r < placement.ranks; ++r) {
    double values = 0;
    for (int c = 0; c < placement.chunks_per_rank; ++c) {
      const int pos = placement.locate(r, c)->position;
      const int nb = cut[size_t(pos) + 1] - cut[size_t(pos)];
      // Under sequence parallelism what passes between blocks is the rank's own rows; a first
      // stage gathers its input gradient for the embedding, a last its output for the head (and
      // that output's gradient is whole).
      // In backward the input gradients' FP8 codes take two rooms in turn (not under sequence parallelism).
      const bool sp = l.sp && l.tp > 1;
      const double own = sp ? d / l.tp : d, whole = sp ? d : 0, code_rooms = sp ? 0 : 2 * codes * d;
      // tokens, block inputs; input gradients
      double slot = 2 + (nb + 1) * own, later = (nb + 1) * own + (pos == 0 ? whole : 0) + code_rooms;
      double work = 0, temp = 0;
      for (int i = cut[size_t(pos)]; i < cut[size_t(pos) + 1]; ++i) {
        const BlockValues b = moetrain_block(m, i >= m.n_dense_layers, l.recompute, l.tp, l.ep, expert_rows, half,
                                             out_half, sp, codes);
        slot += b.kept;
        later += b.work;
        work = std::max(work, b.work);
        temp = std::max(temp, b.temp);
      }
      if (pos == placement.stages - 1) {
        const double tokens = double(l.micro_batch) * m.seq_len / l.cp;
        const HeadLogits logits = head_logits_values(m, tokens);
        temp = std::max(temp, logits.once / tokens);
        slot += 2 * d + 2 + 2 * whole + logits.per_microbatch / tokens;  // final norm, the heads' logits
        const BlockValues b =
            moetrain_block(m, mtp_moe, Recompute::none, l.tp, l.ep, expert_rows, half, out_half, sp, codes);
        // MTP modules keep everything (their blocks' own rows beside the gathered ones)
        slot += m.mtp.depth * (17 * d + 6 + b.kept + b.work + (sp ? 2 * own : 0));
        if (m.mtp.depth > 0) temp = std::max(temp, b.temp);
      }
      // The executor's arenas: a micro-batch takes the last freed one at its forward and frees it
      // after its backward (B) or weight pass (W); each grows to the most a micro-batch needed.
      // A deferred weight pass (I, then W) keeps the blocks' backward work and every input
      // gradient with the micro-batch; a full backward (or any under recomputation, which takes
      // the weights at once) keeps two input gradients and works in the scratch arena.
      std::vector<double> arena;
      std::vector<int> free_arenas, arena_of(size_t(microbatches), -1);
      bool scratch = false;
      for (const pipeline::ComputeOp& op : order[size_t(r)])
        for (const pipeline::Task& t : pipeline::tasks_of(op)) {
          if (t.chunk != c) continue;
          int& a = arena_of[size_t(t.microbatch)];
          if (t.pass == pipeline::Pass::forward) {
            if (free_arenas.empty()) free_arenas.push_back(int(arena.size())), arena.push_back(0);
            a = free_arenas.back();
            free_arenas.pop_back();
          } else if (t.pass != pipeline::Pass::weight_grad) {
            const bool deferred = t.pass == pipeline::Pass::input_grad && l.recompute == Recompute::none;
            const double held = deferred ? later : 2 * own + (pos == 0 ? whole : 0) + code_rooms;
            arena[size_t(a)] = std::max(arena[size_t(a)], slot + held);
            scratch = scratch || !deferred;
          }
          if (t.pass == pipeline::Pass::backward || t.pass == pipeline::Pass::weight_grad) free_arenas.push_back(a);
        }
      for (double bytes : arena) values += bytes;
      values += std::max(scratch ? work : 0.0, temp);  // the scratch arena: backward work, forward temporaries
    }
    busiest = std::max(busiest, values);
  }
  return busiest;
}

}  // namespace

HeadLogits head_logits_values(const ModelConfig& m, double tokens) {
  const double V = m.vocab_size, chunk = m.head_chunk_tokens, heads = 1 + m.mtp.depth;
  if (chunk > 0) return {0, V * std::min(chunk, tokens)};
  return {heads * V * tokens, 0};
}

double ep_rows_per_token(const ModelConfig& m, const Layout& l) {
  if (l.ep == 1) return m.moe.top_k;
  // The tokens one rank's MoE layer routes in a micro-batch: its 1/tp share of them.
  const int tokens = std::max(1, l.micro_batch * m.seq_len / l.cp / l.tp);
  const EpReceive r{.ep = l.ep, .experts = m.moe.n_routed_experts, .top_k = m.moe.top_k, .bound = l.ep_receive_bound};
  return double(ep_reserved_rows(r, tokens)) / tokens;
}

RankMemory trainer_memory(const ModelConfig& m, int global_batch, const Layout& l, double prepared_bytes) {
  const pipeline::Placement placement = placement_of(l);
  RankMemory memory = moetrain_memory(m, l, placement, prepared_bytes);
  const double tokens = double(l.micro_batch) * m.seq_len / l.cp;
  const int microbatches = global_batch / (l.dp * l.micro_batch);
  const double average = m.moe.top_k;
  const double reserved = ep_rows_per_token(m, l);
  memory.activations = 4 * tokens * moetrain_activation_values(m, l, placement, microbatches, reserved);
  if (reserved != average)
    memory.ep_headroom =
        memory.activations - 4 * tokens * moetrain_activation_values(m, l, placement, microbatches, average);
  return memory;
}

}  // namespace mt
