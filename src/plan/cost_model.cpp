// The step-time and memory model. Units: seconds, bytes, FLOPs. Each formula names what it
// counts; the README's planner section lists the assumptions.
#include "plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "pipeline/generators.hpp"
#include "model/flops.hpp"
#include "plan/chunk_compute.hpp"
#include "util/error.hpp"

namespace mt::plan {

using pipeline::Kind;

namespace {

// A collective among `n` ranks spaced `stride` apart in rank order (tensor-parallel ranks are
// adjacent): how many share a scale-up domain, and how many domains the group spans.
struct Span {
  int per_domain;
  int domains;
};
Span span(const Cluster& c, int n, int stride) {
  int per = std::clamp(c.domain / std::max(stride, 1), 1, n);
  return {per, (n + per - 1) / per};
}

// Hierarchical all-reduce (reduce-scatter inside the domain, all-reduce across domains on each
// rank's 1/per share, all-gather inside): one-direction bytes per rank over each link.
double all_reduce_time(const Cluster& c, double bytes, int n, int stride) {
  if (n <= 1 || bytes <= 0) return 0;
  Span s = span(c, n, stride);
  double inside = s.per_domain > 1 ? 2.0 * (s.per_domain - 1) / s.per_domain * bytes / c.domain_bandwidth(s.per_domain) : 0;
  double across = s.domains > 1 ? 2.0 * (s.domains - 1) / s.domains * (bytes / s.per_domain) / c.scale_out_bandwidth : 0;
  return (inside + across) / c.bus_efficiency;
}

// Activation bytes one token leaves saved in one layer for backward (BF16), before tensor
// parallelism divides them: layer inputs, normalized inputs, projections and FFN intermediates.
struct LayerActivations {
  double attention;  // split by tensor (sequence) parallelism
  double ffn;        // dense FFN: split by tensor parallelism; MoE: not split
};
LayerActivations layer_activations(const ModelConfig& m, bool moe, const Layout& l) {
  const auto& a = m.attention;
  const double d = m.d_model, H = m.n_heads;
  const bool selective = l.recompute == Recompute::selective;
  double attn;  // values per token
  if (a.kind == "mla") {
    // Layer input, normalized input, latents, per-head q/k/v from the up-projections, output.
    const double heads = H * (2.0 * (a.qk_nope_head_dim + a.qk_rope_head_dim) + a.v_head_dim);
    attn = 2 * d + a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim + H * a.v_head_dim + (selective ? 0 : heads);
  } else {
    attn = 2 * d + 2.0 * H * m.head_dim + 2.0 * (a.n_kv_heads > 0 ? a.n_kv_heads : H) * m.head_dim;
  }
  const double experts = moe ? m.moe.top_k + m.moe.n_shared_experts : 1;
  const double hidden = moe ? m.moe.expert_hidden : m.ffn_hidden;
  // FFN input per expert copy, gate and up outputs, their SwiGLU product (recomputed when selective).
  double ffn = 2 * d + experts * (d + (selective ? 2 : 3) * hidden);
  // Selective recompute also redoes the RMSNorms (DeepSeek-V3 report §3.2.3).
  if (selective) attn -= d, ffn -= d;
  // FP8 training caches the FFN inputs in FP8 (DeepSeek-V3 report §3.3, low-precision storage).
  const double ffn_bytes = l.fp8 ? 1 : 2;
  return {2 * attn, ffn_bytes * ffn + (moe ? 4.0 * m.moe.n_routed_experts : 0)};
}

// Activation bytes one token leaves in all layers (MTP blocks included) on one tensor-parallel
// rank, under the layout's recomputation and precision.
double model_activations_per_token(const ModelConfig& m, const Layout& l) {
  const int moe_blocks = moe_layer_count(m), dense_blocks = m.n_layers + m.mtp.depth - moe_blocks;
  const LayerActivations dense = layer_activations(m, false, l), moe = layer_activations(m, true, l);
  return dense_blocks * (dense.attention + dense.ffn) / l.tp + moe_blocks * (moe.attention / l.tp + moe.ffn);
}

// The BF16 recipe's activation bytes on a rank: `live` micro-batches of its pieces' saved
// tensors, and the logits.
double recipe_activations(const ModelConfig& m, const Layout& l, double T, int pieces, int live) {
  double per_token_piece = model_activations_per_token(m, l) / pieces;
  if (l.recompute == Recompute::full) {
    // Only each layer's input is kept (BF16; under sequence parallelism its 1/tp of the rows); one
    // layer is rebuilt at a time during backward.
    Layout plain = l;
    plain.recompute = Recompute::none;
    LayerActivations a = layer_activations(m, moe_layer_count(m) > 0, plain);
    const double layers_per_piece = double(m.n_layers + m.mtp.depth) / pieces;
    const double input_share = l.sp && l.tp > 1 ? 1.0 / l.tp : 1.0;
    per_token_piece = 2.0 * m.d_model * layers_per_piece * input_share +
                      (a.attention + a.ffn) / l.tp / std::max(1.0, double(live));
  }
  const double logits = T * m.vocab_size * 4.0 / l.tp * (1 + m.mtp.depth);
  return per_token_piece * T * live + logits;
}

// The model cut into the pipeline's stages as the trainer cuts it (pipeline_cut); returns the
// busiest rank's share of the forward FLOPs over the average rank's. 1 without a schedule.
double stage_imbalance(const ModelConfig& m, const Layout& l) {
  if (!l.scheduled()) return 1;
  const pipeline::Placement placement = placement_of(l);
  const std::vector<double> piece = stage_forward_flops(m, pipeline_cut(m, placement.stages));
  double busiest = 0, all = 0;
  for (int r = 0; r < l.pp; ++r) {
    double work = 0;
    for (int c = 0; c < placement.chunks_per_rank; ++c) work += piece[placement.locate(r, c)->position];
    busiest = std::max(busiest, work);
    all += work;
  }
  return busiest / (all / l.pp);
}

}  // namespace

std::string layout_problem(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l) {
  auto s = [](long v) { return std::to_string(v); };
  if (l.world() > c.accelerators)
    return "dp*tp*cp*pp = " + s(l.world()) + " is more than the cluster's " + s(c.accelerators) + " accelerators";
  if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0)
    return "cp = " + s(l.cp) + ": the sequence of " + s(m.seq_len) +
           " tokens must split into 2*cp equal pieces (each rank takes one from each end, to balance causal attention)";
  if (l.tp > c.domain) return "tp = " + s(l.tp) + " spans scale-up domains of " + s(c.domain) + "; keep tp <= " + s(c.domain);
  // The trainer's rules (config/validate.cpp), so that train runs whatever plan proposes.
  if (m.n_heads % l.tp != 0) return "tp = " + s(l.tp) + " does not divide the " + s(m.n_heads) + " heads";
  if (const int kv = m.attention.n_kv_heads ? m.attention.n_kv_heads : m.n_heads; m.attention.kind == "mha" && kv % l.tp)
    return "tp = " + s(l.tp) + " does not divide the " + s(kv) + " key/value heads";
  if (m.n_dense_layers > 0 && m.ffn_hidden % l.tp != 0)
    return "tp = " + s(l.tp) + " does not divide the dense FFN's " + s(m.ffn_hidden) + " hidden units";
  if ((moe_layer_count(m) > 0 || l.sp) && (long(l.micro_batch) * m.seq_len / l.cp) % l.tp != 0)
    return "tp = " + s(l.tp) + " does not divide a micro-batch's " + s(long(l.micro_batch) * m.seq_len / l.cp) +
           " tokens per rank, which the MoE and sequence parallelism split over the tensor-parallel ranks";
  if (l.sp && l.tp == 1) return "sequence parallelism (sp) needs tp > 1";
  if ((l.dp * l.tp * l.cp) % l.ep != 0)
    return "ep = " + s(l.ep) + " does not divide dp*tp*cp = " + s(l.dp * l.tp * l.cp);
  if (moe_layer_count(m) == 0 && l.ep > 1) return "ep = " + s(l.ep) + " but the model has no routed experts";
  if (moe_layer_count(m) > 0 && m.moe.n_routed_experts % l.ep != 0)
    return "ep = " + s(l.ep) + " does not divide the " + s(m.moe.n_routed_experts) + " routed experts";
  if (const int pieces = placement_of(l).stages; pieces > m.n_layers)
    return "the pipeline needs " + s(pieces) + " stages but the model has " + s(m.n_layers) +
           " layers (every stage needs one; the MTP modules go with the last)";
  if (global_batch % (l.dp * l.micro_batch) != 0)
    return "dp*mbs = " + s(l.dp * l.micro_batch) + " does not divide the global batch of " + s(global_batch) + " sequences";
  if (l.pp == 1 && l.schedule != Kind::one_f_one_b && l.schedule != Kind::dualpipev)
    return "with pp = 1 the schedule is 1f1b (micro-batches one after another) or dualpipev (two overlapped)";
  if (l.scheduled()) {
    std::string why;
    try {
      pipeline::validate_request({l.schedule, l.pp, global_batch / (l.dp * l.micro_batch), l.schedule == Kind::interleaved ? l.vpp : 1});
    } catch (const UserError& e) {
      why = e.what();
    }
    if (!why.empty()) return why;
  }
  if (moe_layer_count(m) > 0 && m.moe.aux_loss == BalanceLoss::global_batch && l.scheduled() && l.schedule != Kind::gpipe)
    return "the global-batch balance loss needs every forward of the step before any backward: only gpipe schedules it";
  if (l.zero == 3 && l.scheduled())
    return "zero=3 (FSDP) with a pipeline schedule regathers weights for every micro-batch of every stage; use zero<=2 "
           "with pipelines";
  return "";
}

Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l) {
  ScheduleTimings timings;
  return estimate_step(m, global_batch, c, l, timings, false);
}

Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       ScheduleTimings& timings, bool only_if_fits) {
  Estimate e;
  e.layout = l;
  const pipeline::Placement placement = placement_of(l);
  const int pieces = placement.stages, held = placement.chunks_per_rank;
  const int m_count = global_batch / (l.dp * l.micro_batch);
  e.microbatches = m_count;
  // Tokens of one micro-batch on one rank: a context-parallel rank holds 1/cp of each sequence.
  const double T = double(l.micro_batch) * m.seq_len / l.cp;
  const double d = m.d_model;

  // Compute: one micro-batch through one piece, on one rank (tensor parallelism splits it).
  const ChunkCompute cc = chunk_compute(m, c, l, T, pieces);
  const double f_c = cc.forward, w_c = cc.weight_grad;
  double b_c = cc.backward;
  if (l.recompute == Recompute::full) b_c += f_c;
  const double i_c = b_c - w_c;

  // Tensor parallelism: two all-reduces of the layer's activations forward, two backward (and
  // two more when the forward is recomputed), on the scale-up domain. Software that overlaps
  // them with the GEMMs they feed and drain (overlap_tp) exposes what the GEMMs cannot hide.
  const double layers_per_piece = double(m.n_layers + m.mtp.depth) / pieces;
  const double moe_per_piece = double(moe_layer_count(m)) / pieces;
  const double tp_one = all_reduce_time(c, T * d * 2, l.tp, 1);
  double tp_f = 2 * layers_per_piece * tp_one;
  double tp_b = (l.recompute == Recompute::full ? 4 : 2) * layers_per_piece * tp_one;
  if (c.overlap_tp) {
    tp_f = std::max(0.0, tp_f - cc.linear_gemms);
    tp_b = std::max(0.0, tp_b - (l.recompute == Recompute::full ? 3 : 2) * cc.linear_gemms);
  }

  // Context parallelism: a ring passes every layer's keys and values around the cp ranks (each
  // sends its 1/cp share cp-1 times) forward; backward passes them again with their gradients.
  // The ring overlaps the attention core it feeds.
  double cp_f = 0, cp_b = 0;
  if (l.cp > 1) {
    const auto& a = m.attention;
    const double kv_values = a.kind == "mla"
                                 ? double(m.n_heads) * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
                                 : 2.0 * (a.n_kv_heads ? a.n_kv_heads : m.n_heads) * m.head_dim;
    const Span s = span(c, l.cp, l.tp);
    const double bw = s.domains > 1 ? c.scale_out_bandwidth : c.domain_bandwidth(l.cp);
    const double ring = (l.cp - 1) * T * kv_values / l.tp * 2 / bw / c.bus_efficiency;
    const double attention = cc.attention / layers_per_piece;
    cp_f = layers_per_piece * std::max(0.0, ring - attention);
    cp_b = layers_per_piece * std::max(0.0, 2 * ring - 2 * attention);
  }

  // Expert parallelism: dispatch and combine forward, their transposes backward, of the rank's
  // 1/tp share of the tokens. A token crosses once to each other domain holding one of its
  // experts (top_k experts spread at random over the domains, at most `topk_groups` of them under
  // node-limited routing), then fans out to its experts inside.
  double a2a_f = 0, a2a_b = 0;
  if (l.ep > 1 && moe_layer_count(m) > 0) {
    Span s = span(c, l.ep, 1);  // expert-parallel ranks are adjacent positions of a stage (parallel/layout.hpp)
    const double D = s.domains, K = m.moe.top_k;
    double reached = D * (1 - std::pow(1 - 1 / D, K));
    if (m.moe.n_groups > 1) reached = std::min(reached, double(m.moe.topk_groups));
    const double remote_domains = s.domains > 1 ? reached * (D - 1) / D : 0;
    const double fan_out = K * double(s.per_domain - 1) / s.per_domain;
    const double tokens = T / l.tp;
    auto a2a = [&](double bytes_per_value) {
      double across = remote_domains * tokens * d * bytes_per_value / c.scale_out_bandwidth;
      double inside = s.per_domain > 1 ? fan_out * tokens * d * bytes_per_value / c.domain_bandwidth(s.per_domain) : 0;
      return std::max(across, inside) / c.bus_efficiency;  // the two hops pipeline
    };
    // Dispatch in FP8 where the software quantizes before it (fp8_dispatch); combine in BF16.
    a2a_f = moe_per_piece * (a2a(l.fp8 && c.fp8_dispatch ? 1 : 2) + a2a(2));
    a2a_b = moe_per_piece * (a2a(2) + a2a(2));
  }

  // Pipeline transfers: one micro-batch's activations (sequence-parallel slice per TP rank),
  // across domains once a pipeline neighbour is dp*tp*cp ranks away.
  double p2p = 0;
  if (l.pp > 1) {
    const int stage = l.dp * l.tp * l.cp;
    double bw = stage >= c.domain ? c.scale_out_bandwidth : c.domain_bandwidth(stage * 2);
    p2p = T * d * 2 / l.tp / bw / c.bus_efficiency;
  }

  // Parameters held per rank: dense weights split by tp and the pipeline (DualPipe keeps two
  // stages), routed experts split by ep and the pipeline.
  const double experts = routed_expert_params(m), dense = total_params(m) - experts;
  const double p_dense = dense / l.tp / pieces * held;
  const double p_expert = experts / l.ep / pieces * held;
  // Context-parallel ranks hold the same weights: they join the data-parallel groups.
  const int dp_ranks = l.dp * l.cp, expert_dp = l.dp * l.tp * l.cp / l.ep;
  // DualPipe's two copies of a stage live on mirror ranks and sum their gradients: the mirror
  // joins each gradient group.
  const int copies = l.pp > 1 && l.schedule == Kind::dualpipe ? 2 : 1;
  // Data parallelism: reducing the rank's BF16 gradients (all-reduce, or reduce-scatter plus
  // all-gather of the updated BF16 weights under ZeRO: the same volume). Dense replicas are tp
  // ranks apart; an expert's replicas ep ranks apart (parallel/layout.hpp), in other domains once
  // ep reaches a domain.
  const double dp_full = all_reduce_time(c, 2 * p_dense, copies * dp_ranks, l.tp) +
                         all_reduce_time(c, 2 * p_expert, copies * expert_dp, l.ep);
  // Sharded gradients cannot accumulate over micro-batches: under ZeRO-2 each chunk's backward
  // reduce-scatters its gradients at once; FSDP also gathers the chunk's weights before its
  // forward and backward. That traffic runs beside compute, on the links the all-to-all uses.
  const double dp_chunk = (l.zero == 2 ? 0.5 : l.zero == 3 ? 1.5 : 0.0) * dp_full / held;
  // What stays for the end of the step: the all-reduce, or the weight gather after the update.
  const double dp_end = l.zero <= 1 ? dp_full : l.zero == 2 ? 0.5 * dp_full : 0.0;

  // Software that pairs one micro-batch's forward with another's backward in a 1F1B steady state
  // (overlap_ep) hides each all-to-all behind the other pass's compute.
  // The all-to-all kernels take `comm_sm_share` of the compute units from the compute they hide behind.
  const double slowed = c.comm_sm_share / (1 - c.comm_sm_share);
  if (c.overlap_ep && l.pp > 1 && l.schedule != Kind::dualpipe && l.schedule != Kind::dualpipev &&
      l.schedule != Kind::gpipe) {
    a2a_f = std::max(0.0, a2a_f - b_c) + slowed * std::min(a2a_f, b_c);
    a2a_b = std::max(0.0, a2a_b - f_c) + slowed * std::min(a2a_b, f_c);
  }
  const double comm_f = tp_f + cp_f + a2a_f, comm_b = tp_b + cp_b + a2a_b;
  // The schedule runs at the pace of its busiest rank: scale the average chunk to it.
  const double k = stage_imbalance(m, l);
  const bool paired = l.scheduled() && (l.schedule == Kind::dualpipe || l.schedule == Kind::dualpipev);
  pipeline::Costs costs;
  costs.forward = k * (f_c + comm_f);
  costs.backward = k * (b_c + comm_b);
  costs.input_grad = k * (i_c + comm_b);
  costs.weight_grad = k * w_c;
  // DualPipe overlaps one micro-batch's communication with the other's compute, which runs on the
  // compute units the communication leaves while it runs.
  const double pair_comm = comm_f + comm_b + dp_chunk;
  costs.overlapped = k * std::max(f_c + b_c + slowed * std::min(pair_comm, f_c + b_c), pair_comm);
  if (paired) {
    // A chunk outside a pair (the warm-up's forwards, the cool-down's backwards and weight passes)
    // moves its own sharded-gradient traffic, beside its compute: FSDP's gather before the forward
    // (a third of it), the rest with the weight gradients.
    const double dp_f = l.zero == 3 ? dp_chunk / 3 : 0.0, dp_w = dp_chunk - dp_f;
    costs.forward = k * std::max(f_c + comm_f, dp_f);
    costs.backward = k * std::max(b_c + comm_b, dp_w);
    costs.weight_grad = k * std::max(w_c, dp_w);
  }
  costs.latency = p2p;
  e.chunk_costs = costs;
  e.stage_imbalance = k;

  // Work per micro-batch on the average rank in the steady state (the busiest takes k times it).
  double per_mb = 0, per_mb_compute = 0;
  if (!l.scheduled()) {
    per_mb = f_c + b_c + comm_f + comm_b;
    per_mb_compute = f_c + b_c;
  } else if (paired) {
    per_mb = (l.schedule == Kind::dualpipev ? 2 : 1) * costs.overlapped / k;
    per_mb_compute = (l.schedule == Kind::dualpipev ? 2 : 1) * (f_c + b_c);
  } else {
    per_mb = held * (costs.forward + costs.backward) / k;
    per_mb_compute = held * (f_c + b_c);
  }
  // Memory per rank besides activations: BF16 weights, FP32 gradients, FP32 master weights and
  // moments, each sharded as the ZeRO stage says.
  const double shard_dense = l.zero >= 1 ? dp_ranks : 1, shard_expert = l.zero >= 1 ? expert_dp : 1;
  const double params = p_dense + p_expert;
  const double shard_all = (p_dense / shard_dense + p_expert / shard_expert);
  e.memory.weights = 2 * (l.zero == 3 ? shard_all : params);
  e.memory.grads = 4 * (l.zero >= 2 ? shard_all : params);
  e.memory.optimizer = 12 * (l.zero >= 1 ? shard_all : params);
  e.memory_limit = c.accel.hbm_bytes * c.memory_usable;
  if (only_if_fits && e.memory.total() > e.memory_limit) return e;  // fits stays false

  double makespan;
  int peak_chunks = 1;
  if (!l.scheduled()) {
    makespan = m_count * per_mb;
  } else {
    // Past the ramps a schedule repeats with a fixed period, so simulate two short pipelines
    // (about 2*pp and 4*pp micro-batches, valid for the schedule) and extend the line through
    // them; compute orders suffice, no transfers are needed.
    const int vpp = l.schedule == Kind::interleaved ? l.vpp : 1;
    auto valid_from = [&](int want) {
      int sim = std::min(m_count, want);
      while (sim < m_count && !pipeline::validate_request_ok({l.schedule, l.pp, sim, vpp})) ++sim;
      return sim;
    };
    auto timeline = [&](int sim) { return timings.run({l.schedule, l.pp, sim, vpp}, costs); };
    const int m1 = valid_from(2 * l.pp), m2 = valid_from(4 * l.pp);
    const ScheduleTimings::Result first = timeline(m1);
    makespan = first.makespan;
    if (m2 > m1) {
      const double period = (timeline(m2).makespan - first.makespan) / (m2 - m1);
      makespan += (m_count - m1) * period;
    }
    // GPipe keeps every micro-batch until its backward, more than the short pipelines hold.
    peak_chunks = l.schedule == Kind::gpipe ? m_count : first.peak_live_chunks;
  }
  e.peak_live_chunks = peak_chunks;

  // Software that overlaps data-parallel traffic (overlap_dp) reduces gradients during the rank's
  // last backward and gathers updated weights during its first forward.
  double dp_end_exposed = dp_end;
  if (c.overlap_dp) {
    const double window_b = held * b_c, window_f = held * f_c;
    if (l.zero == 0) dp_end_exposed = std::max(0.0, dp_end - window_b);
    else if (l.zero == 1) dp_end_exposed = std::max(0.0, dp_end / 2 - window_b) + std::max(0.0, dp_end / 2 - window_f);
    else dp_end_exposed = std::max(0.0, dp_end - window_f);
  }
  // Outside DualPipe's pairs, the per-chunk gradient traffic hides behind the chunk's compute.
  const double dp_time =
      dp_end_exposed + (paired ? 0.0 : m_count * held * std::max(0.0, dp_chunk - (f_c + b_c)));
  // AdamW reads FP32 master weight, moments and gradient and writes them back with a BF16 copy.
  const double opt_time = (p_dense / shard_dense + p_expert / shard_expert) * 30 / c.accel.hbm_bandwidth;

  e.step_s = makespan + dp_time + opt_time;
  e.time.compute = m_count * per_mb_compute;
  e.time.dp = dp_time;
  if (paired) {
    // A pair waits for its communication: share the wait among what was communicated.
    const double exposed = m_count * std::max(0.0, per_mb - per_mb_compute);
    const double total = std::max(comm_f + comm_b + dp_chunk, 1e-30);
    e.time.ep = exposed * (a2a_f + a2a_b) / total;
    e.time.tp = exposed * (tp_f + tp_b) / total;
    e.time.cp = exposed * (cp_f + cp_b) / total;
    e.time.dp += exposed * dp_chunk / total;
  } else {
    e.time.tp = m_count * held * (tp_f + tp_b);
    e.time.cp = m_count * held * (cp_f + cp_b);
    e.time.ep = m_count * held * (a2a_f + a2a_b);
  }
  e.time.imbalance = m_count * per_mb * (k - 1);
  // The communication shares above assume every micro-batch's chunks run in the steady state; a
  // short schedule (a few micro-batches, mostly ramps) waits less. The parts are shares of the
  // step: where they claim more than the step leaves, the exposed communication is scaled down.
  const double busy = e.time.compute + e.time.imbalance, comm = e.time.tp + e.time.cp + e.time.ep + (e.time.dp - dp_time);
  const double room = makespan - busy;
  if (comm > room && comm > 0) {
    const double scale = std::max(0.0, room) / comm;
    e.time.tp *= scale;
    e.time.cp *= scale;
    e.time.ep *= scale;
    e.time.dp = dp_time + (e.time.dp - dp_time) * scale;
  }
  e.time.bubble = std::max(0.0, makespan + dp_time - e.time.compute - e.time.tp - e.time.cp - e.time.ep - e.time.dp -
                                        e.time.imbalance);
  e.time.optimizer = opt_time;

  if (l.storage != Storage::bf16_recipe) {
    e.memory = trainer_memory(m, global_batch, l);
  } else {
    e.memory.activations = recipe_activations(m, l, T, pieces, peak_chunks);
  }
  e.fits = e.memory.total() <= e.memory_limit;

  const double tokens = double(global_batch) * m.seq_len;
  e.mfu = training_flops_per_token(m) * tokens / (e.step_s * l.world() * c.accel.bf16_flops);
  e.tokens_per_s_per_accel = tokens / e.step_s / l.world();
  return e;
}

double activation_bytes_per_token(const ModelConfig& m, const Layout& l) { return model_activations_per_token(m, l); }

}  // namespace mt::plan
