#include "plan/cost_terms.hpp"

#include <algorithm>
#include <cmath>

#include "model/flops.hpp"
#include "pipeline/generators.hpp"
#include "plan/chunk_compute.hpp"
#include "plan/collectives.hpp"

namespace mt::plan {

using pipeline::Kind;

namespace {

// The all-to-all kernels take `comm_sm_share` of the compute units from the compute they hide
// behind: that compute slows by this fraction of the communication it hides.
double hiding_slowdown(const Cluster& c) { return c.comm_sm_share / (1 - c.comm_sm_share); }

}  // namespace

ChunkTimes chunk_times(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s) {
  const ChunkCompute cc = chunk_compute(m, c, l, s.tokens, s.pieces);
  ChunkTimes t;
  t.forward = cc.forward;
  t.weight_grad = cc.weight_grad;
  t.backward = cc.backward;
  if (l.recompute == Recompute::full) t.backward += t.forward;
  t.input_grad = t.backward - t.weight_grad;
  t.linear_gemms = cc.linear_gemms;
  t.attention = cc.attention;
  return t;
}

// Two all-reduces of the layer's activations forward, two backward (and two more when the forward
// is recomputed), on the scale-up domain. Software that overlaps them with the GEMMs they feed and
// drain (overlap_tp) exposes what the GEMMs cannot hide.
PassComm tensor_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                              const ChunkTimes& t) {
  const double d = m.d_model;
  const double tp_one = all_reduce_time(c, s.tokens * d * 2, l.tp, 1);
  PassComm p;
  p.forward = 2 * s.layers_per_piece * tp_one;
  p.backward = (l.recompute == Recompute::full ? 4 : 2) * s.layers_per_piece * tp_one;
  if (c.overlap_tp) {
    p.forward = std::max(0.0, p.forward - t.linear_gemms);
    p.backward = std::max(0.0, p.backward - (l.recompute == Recompute::full ? 3 : 2) * t.linear_gemms);
  }
  return p;
}

// A ring passes every layer's keys and values around the cp ranks (each sends its 1/cp share cp-1
// times) forward; backward passes them again with their gradients. The ring overlaps the attention
// core it feeds.
PassComm context_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                               const ChunkTimes& t) {
  PassComm p;
  if (l.cp <= 1) return p;
  const auto& a = m.attention;
  const double kv_values = a.kind == AttentionKind::mla
                               ? double(m.n_heads) * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
                               : 2.0 * (a.n_kv_heads ? a.n_kv_heads : m.n_heads) * m.head_dim;
  const Span sp = span(c, l.cp, l.tp);
  const double bw = sp.domains > 1 ? c.scale_out_bandwidth : c.domain_bandwidth(l.cp);
  const double ring = (l.cp - 1) * s.tokens * kv_values / l.tp * 2 / bw / c.bus_efficiency;
  const double attention = t.attention / s.layers_per_piece;
  p.forward = s.layers_per_piece * std::max(0.0, ring - attention);
  p.backward = s.layers_per_piece * std::max(0.0, 2 * ring - 2 * attention);
  return p;
}

// Dispatch and combine forward, their transposes backward, of the rank's 1/tp share of the tokens.
// A token crosses once to each other domain holding one of its experts (top_k experts spread at
// random over the domains, at most `topk_groups` of them under node-limited routing), then fans out
// to its experts inside. Software that pairs one micro-batch's forward with another's backward in a
// 1F1B steady state (overlap_ep) hides each all-to-all behind the other pass's compute.
PassComm expert_parallel_comm(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s,
                              const ChunkTimes& t) {
  PassComm p;
  if (l.ep > 1 && moe_layer_count(m) > 0) {
    const double d = m.d_model;
    Span sp = span(c, l.ep, 1);  // expert-parallel ranks are adjacent positions of a stage (parallel/layout.hpp)
    const double D = sp.domains, K = m.moe.top_k;
    double reached = D * (1 - std::pow(1 - 1 / D, K));
    if (m.moe.n_groups > 1) reached = std::min(reached, double(m.moe.topk_groups));
    const double remote_domains = sp.domains > 1 ? reached * (D - 1) / D : 0;
    const double fan_out = K * double(sp.per_domain - 1) / sp.per_domain;
    const double tokens = s.tokens / l.tp;
    auto a2a = [&](double bytes_per_value) {
      double across = remote_domains * tokens * d * bytes_per_value / c.scale_out_bandwidth;
      double inside =
          sp.per_domain > 1 ? fan_out * tokens * d * bytes_per_value / c.domain_bandwidth(sp.per_domain) : 0;
      return std::max(across, inside) / c.bus_efficiency;  // the two hops pipeline
    };
    // Dispatch in FP8 where the software quantizes before it (fp8_dispatch); combine in BF16.
    p.forward = s.moe_per_piece * (a2a(l.fp8 && c.fp8_dispatch ? 1 : 2) + a2a(2));
    p.backward = s.moe_per_piece * (a2a(2) + a2a(2));
  }
  const double slowed = hiding_slowdown(c);
  if (c.overlap_ep && l.pp > 1 && l.schedule != Kind::dualpipe && l.schedule != Kind::dualpipev &&
      l.schedule != Kind::gpipe) {
    p.forward = std::max(0.0, p.forward - t.backward) + slowed * std::min(p.forward, t.backward);
    p.backward = std::max(0.0, p.backward - t.forward) + slowed * std::min(p.backward, t.forward);
  }
  return p;
}

// One micro-batch's activations (sequence-parallel slice per TP rank), across domains once a
// pipeline neighbour is dp*tp*cp ranks away.
double pipeline_latency(const ModelConfig& m, const Cluster& c, const Layout& l, const StepShape& s) {
  if (l.pp <= 1) return 0;
  const double d = m.d_model;
  const int stage = l.dp * l.tp * l.cp;
  double bw = stage >= c.domain ? c.scale_out_bandwidth : c.domain_bandwidth(stage * 2);
  return s.tokens * d * 2 / l.tp / bw / c.bus_efficiency;
}

// Dense weights split by tp and the pipeline (DualPipe keeps two stages), routed experts split by
// ep and the pipeline. Context-parallel ranks hold the same weights: they join the data-parallel
// groups.
HeldParams held_params(const ModelConfig& m, const Layout& l, const StepShape& s) {
  const double experts = routed_expert_params(m), dense = total_params(m) - experts;
  HeldParams h;
  h.dense = dense / l.tp / s.pieces * s.held;
  h.expert = experts / l.ep / s.pieces * s.held;
  h.dense_replicas = l.dp * l.cp;
  h.expert_replicas = l.dp * l.tp * l.cp / l.ep;
  return h;
}

// Reducing the rank's BF16 gradients (all-reduce, or reduce-scatter plus all-gather of the updated
// BF16 weights under ZeRO: the same volume). Dense replicas are tp ranks apart; an expert's replicas
// ep ranks apart (parallel/layout.hpp), in other domains once ep reaches a domain. DualPipe's two
// copies of a stage live on mirror ranks and sum their gradients: the mirror joins each group.
DataParallelTraffic data_parallel_traffic(const Cluster& c, const Layout& l, const StepShape& s,
                                          const HeldParams& h) {
  const int copies = l.pp > 1 && l.schedule == Kind::dualpipe ? 2 : 1;
  DataParallelTraffic dp;
  dp.full = all_reduce_time(c, 2 * h.dense, copies * h.dense_replicas, l.tp) +
            all_reduce_time(c, 2 * h.expert, copies * h.expert_replicas, l.ep);
  // Sharded gradients cannot accumulate over micro-batches: under ZeRO-2 each chunk's backward
  // reduce-scatters its gradients at once; FSDP also gathers the chunk's weights before its
  // forward and backward. That traffic runs beside compute, on the links the all-to-all uses.
  dp.per_chunk = (l.zero == 2 ? 0.5 : l.zero == 3 ? 1.5 : 0.0) * dp.full / s.held;
  // What stays for the end of the step: the all-reduce, or the weight gather after the update.
  dp.at_end = l.zero <= 1 ? dp.full : l.zero == 2 ? 0.5 * dp.full : 0.0;
  return dp;
}

// The model cut into the pipeline's stages as the trainer cuts it (pipeline_cut).
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

pipeline::Costs chunk_costs(const Cluster& c, const Layout& l, const StepShape& s, const ChunkTimes& t,
                            const ChunkComm& comm, const DataParallelTraffic& dp, double k) {
  const double comm_f = comm.forward(), comm_b = comm.backward();
  pipeline::Costs costs;
  costs.forward = k * (t.forward + comm_f);
  costs.backward = k * (t.backward + comm_b);
  costs.input_grad = k * (t.input_grad + comm_b);
  costs.weight_grad = k * t.weight_grad;
  // DualPipe overlaps one micro-batch's communication with the other's compute, which runs on the
  // compute units the communication leaves while it runs.
  const double pair_comm = comm_f + comm_b + dp.per_chunk;
  costs.overlapped = k * std::max(t.forward + t.backward +
                                      hiding_slowdown(c) * std::min(pair_comm, t.forward + t.backward),
                                  pair_comm);
  if (s.paired) {
    // A chunk outside a pair (the warm-up's forwards, the cool-down's backwards and weight passes)
    // moves its own sharded-gradient traffic, beside its compute: FSDP's gather before the forward
    // (a third of it), the rest with the weight gradients.
    const double dp_f = l.zero == 3 ? dp.per_chunk / 3 : 0.0, dp_w = dp.per_chunk - dp_f;
    costs.forward = k * std::max(t.forward + comm_f, dp_f);
    costs.backward = k * std::max(t.backward + comm_b, dp_w);
    costs.weight_grad = k * std::max(t.weight_grad, dp_w);
  }
  return costs;
}

MicroBatchWork microbatch_work(const Layout& l, const StepShape& s, const ChunkTimes& t, const ChunkComm& comm,
                               const pipeline::Costs& costs, double k) {
  MicroBatchWork w;
  if (!l.scheduled()) {
    w.total = t.forward + t.backward + comm.forward() + comm.backward();
    w.compute = t.forward + t.backward;
  } else if (s.paired) {
    w.total = (l.schedule == Kind::dualpipev ? 2 : 1) * costs.overlapped / k;
    w.compute = (l.schedule == Kind::dualpipev ? 2 : 1) * (t.forward + t.backward);
  } else {
    w.total = s.held * (costs.forward + costs.backward) / k;
    w.compute = s.held * (t.forward + t.backward);
  }
  return w;
}

namespace {

// The parameters whose FP32 state a rank keeps under ZeRO-1 and above: its share of each group.
double sharded_params(const Layout& l, const HeldParams& h) {
  const double shard_dense = l.zero >= 1 ? h.dense_replicas : 1, shard_expert = l.zero >= 1 ? h.expert_replicas : 1;
  return (h.dense / shard_dense + h.expert / shard_expert);
}

}  // namespace

// BF16 weights, FP32 gradients, FP32 master weights and moments, each sharded as the ZeRO stage says.
Memory state_memory(const Layout& l, const HeldParams& h) {
  const double params = h.dense + h.expert;
  const double shard_all = sharded_params(l, h);
  Memory memory;
  memory.weights = 2 * (l.zero == 3 ? shard_all : params);
  memory.grads = 4 * (l.zero >= 2 ? shard_all : params);
  memory.optimizer = 12 * (l.zero >= 1 ? shard_all : params);
  return memory;
}

// Past the ramps a schedule repeats with a fixed period, so simulate two short pipelines (about
// 2*pp and 4*pp micro-batches, valid for the schedule) and extend the line through them; compute
// orders suffice, no transfers are needed.
PipelineTime pipeline_time(const Layout& l, const StepShape& s, const MicroBatchWork& work,
                           const pipeline::Costs& costs, ScheduleTimings& timings) {
  const int m_count = s.microbatches;
  PipelineTime p;
  if (!l.scheduled()) {
    p.makespan = m_count * work.total;
    return p;
  }
  const int vpp = l.schedule == Kind::interleaved ? l.vpp : 1;
  auto valid_from = [&](int want) {
    int sim = std::min(m_count, want);
    while (sim < m_count && !pipeline::validate_request_ok({l.schedule, l.pp, sim, vpp})) ++sim;
    return sim;
  };
  auto timeline = [&](int sim) { return timings.run({l.schedule, l.pp, sim, vpp}, costs); };
  const int m1 = valid_from(2 * l.pp), m2 = valid_from(4 * l.pp);
  const ScheduleTimings::Result first = timeline(m1);
  p.makespan = first.makespan;
  if (m2 > m1) {
    const double period = (timeline(m2).makespan - first.makespan) / (m2 - m1);
    p.makespan += (m_count - m1) * period;
  }
  // GPipe keeps every micro-batch until its backward, more than the short pipelines hold.
  p.peak_chunks = l.schedule == Kind::gpipe ? m_count : first.peak_live_chunks;
  return p;
}

// Software that overlaps data-parallel traffic (overlap_dp) reduces gradients during the rank's
// last backward and gathers updated weights during its first forward.
double data_parallel_time(const Cluster& c, const Layout& l, const StepShape& s, const ChunkTimes& t,
                          const DataParallelTraffic& dp) {
  double exposed = dp.at_end;
  if (c.overlap_dp) {
    const double window_b = s.held * t.backward, window_f = s.held * t.forward;
    if (l.zero == 0) exposed = std::max(0.0, dp.at_end - window_b);
    else if (l.zero == 1)
      exposed = std::max(0.0, dp.at_end / 2 - window_b) + std::max(0.0, dp.at_end / 2 - window_f);
    else exposed = std::max(0.0, dp.at_end - window_f);
  }
  // Outside DualPipe's pairs, the per-chunk gradient traffic hides behind the chunk's compute.
  return exposed +
         (s.paired ? 0.0 : s.microbatches * s.held * std::max(0.0, dp.per_chunk - (t.forward + t.backward)));
}

// AdamW reads FP32 master weight, moments and gradient and writes them back with a BF16 copy.
double optimizer_time(const Cluster& c, const Layout& l, const HeldParams& h) {
  return sharded_params(l, h) * 30 / c.accel.hbm_bandwidth;
}

Breakdown step_breakdown(const StepShape& s, const ChunkComm& comm, const DataParallelTraffic& dp,
                         const MicroBatchWork& work, double makespan, double dp_time, double k) {
  const int m_count = s.microbatches;
  Breakdown b;
  b.compute = m_count * work.compute;
  b.dp = dp_time;
  if (s.paired) {
    // A pair waits for its communication: share the wait among what was communicated.
    const double exposed = m_count * std::max(0.0, work.total - work.compute);
    const double total = std::max(comm.forward() + comm.backward() + dp.per_chunk, 1e-30);
    b.ep = exposed * (comm.ep.forward + comm.ep.backward) / total;
    b.tp = exposed * (comm.tp.forward + comm.tp.backward) / total;
    b.cp = exposed * (comm.cp.forward + comm.cp.backward) / total;
    b.dp += exposed * dp.per_chunk / total;
  } else {
    b.tp = m_count * s.held * (comm.tp.forward + comm.tp.backward);
    b.cp = m_count * s.held * (comm.cp.forward + comm.cp.backward);
    b.ep = m_count * s.held * (comm.ep.forward + comm.ep.backward);
  }
  b.imbalance = m_count * work.total * (k - 1);
  // The communication shares above assume every micro-batch's chunks run in the steady state; a
  // short schedule (a few micro-batches, mostly ramps) waits less. The parts are shares of the
  // step: where they claim more than the step leaves, the exposed communication is scaled down.
  const double busy = b.compute + b.imbalance, exposed_comm = b.tp + b.cp + b.ep + (b.dp - dp_time);
  const double room = makespan - busy;
  if (exposed_comm > room && exposed_comm > 0) {
    const double scale = std::max(0.0, room) / exposed_comm;
    b.tp *= scale;
    b.cp *= scale;
    b.ep *= scale;
    b.dp = dp_time + (b.dp - dp_time) * scale;
  }
  b.bubble = std::max(0.0, makespan + dp_time - b.compute - b.tp - b.cp - b.ep - b.dp - b.imbalance);
  return b;
}

}  // namespace mt::plan
