// The step-time and memory model: estimate_step adds up the cost terms (cost_terms.hpp). Units:
// seconds, bytes, FLOPs. docs/planner.md lists the assumptions.
#include "plan/cost_model.hpp"

#include <string>

#include "model/flops.hpp"
#include "pipeline/generators.hpp"
#include "plan/cost_terms.hpp"
#include "plan/memory_model.hpp"
#include "plan/step_shape.hpp"
#include "util/error.hpp"

namespace mt::plan {

using pipeline::Kind;

std::string layout_problem(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l) {
  auto s = [](long v) { return std::to_string(v); };
  if (l.world() > c.accelerators)
    return "dp*tp*cp*pp = " + s(l.world()) + " is more than the cluster's " + s(c.accelerators) + " accelerators";
  if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0)
    return "cp = " + s(l.cp) + ": the sequence of " + s(m.seq_len) +
           " tokens must split into 2*cp equal pieces (each rank takes one from each end, to balance causal attention)";
  if (l.tp > c.domain)
    return "tp = " + s(l.tp) + " spans scale-up domains of " + s(c.domain) + "; keep tp <= " + s(c.domain);
  // The trainer's rules (config/validate.cpp), so that train runs whatever plan proposes.
  if (m.n_heads % l.tp != 0) return "tp = " + s(l.tp) + " does not divide the " + s(m.n_heads) + " heads";
  if (const int kv = m.attention.n_kv_heads ? m.attention.n_kv_heads : m.n_heads;
      m.attention.kind == AttentionKind::mha && kv % l.tp)
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
    return "dp*mbs = " + s(l.dp * l.micro_batch) + " does not divide the global batch of " + s(global_batch) +
           " sequences";
  if (l.pp == 1 && l.schedule != Kind::one_f_one_b && l.schedule != Kind::dualpipev)
    return "with pp = 1 the schedule is 1f1b (micro-batches one after another) or dualpipev (two overlapped)";
  if (l.scheduled()) {
    std::string why;
    try {
      pipeline::validate_request({l.schedule, l.pp, global_batch / (l.dp * l.micro_batch),
                                  l.schedule == Kind::interleaved ? l.vpp : 1});
    } catch (const UserError& e) {
      why = e.what();
    }
    if (!why.empty()) return why;
  }
  if (moe_layer_count(m) > 0 && m.moe.aux_loss == BalanceLoss::global_batch && l.scheduled() &&
      l.schedule != Kind::gpipe)
    return "the global-batch balance loss needs every forward of the step before any backward: only gpipe schedules it";
  if (l.zero == 3 && l.scheduled())
    return "zero=3 (FSDP) with a pipeline schedule regathers weights for every micro-batch of every stage; use zero<=2 "
           "with pipelines";
  return "";
}

Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       const OptimizerPlan& o) {
  ScheduleTimings timings;
  return estimate_step(m, global_batch, c, l, timings, false, o);
}

Estimate estimate_step(const ModelConfig& m, int global_batch, const Cluster& c, const Layout& l,
                       ScheduleTimings& timings, bool only_if_fits, const OptimizerPlan& o) {
  Estimate e;
  e.layout = l;
  const StepShape s = step_shape(m, global_batch, l);
  e.microbatches = s.microbatches;
  const ChunkTimes t = chunk_times(m, c, l, s);
  const ChunkComm comm{tensor_parallel_comm(m, c, l, s, t), context_parallel_comm(m, c, l, s, t),
                       expert_parallel_comm(m, c, l, s, t)};
  const HeldParams held = held_params(m, l, s);
  const DataParallelTraffic dp = data_parallel_traffic(c, l, s, held);
  // The schedule runs at the pace of its busiest rank: the average chunk scales to it.
  const double k = stage_imbalance(m, l);
  e.chunk_costs = chunk_costs(c, l, s, t, comm, dp, k);
  e.chunk_costs.latency = pipeline_latency(m, c, l, s);
  e.stage_imbalance = k;
  const MicroBatchWork work = microbatch_work(l, s, t, comm, e.chunk_costs, k);
  const MuonStepCost muon = muon_step_cost(m, c, l, s, held, o);
  e.memory = state_memory(l, held);
  e.memory.optimizer += muon.optimizer_bytes;
  e.memory_limit = c.accel.hbm_bytes * c.memory_usable;
  if (only_if_fits && e.memory.total() > e.memory_limit) return e;  // fits stays false

  const PipelineTime pipe = pipeline_time(l, s, work, e.chunk_costs, timings);
  e.peak_live_chunks = pipe.peak_chunks;
  const double dp_time = data_parallel_time(c, l, s, t, dp);
  const double opt_time = optimizer_time(c, l, held) + muon.seconds();
  e.step_s = pipe.makespan + dp_time + opt_time;
  e.time = step_breakdown(s, comm, dp, work, pipe.makespan, dp_time, k);
  e.time.optimizer = opt_time;

  if (l.storage != Storage::bf16_recipe) {
    e.memory = trainer_memory(m, global_batch, l);
  } else {
    const RecipeActivations a = recipe_activations(m, l, s.tokens, s.pieces, pipe.peak_chunks);
    e.memory.activations = a.bytes;
    e.memory.ep_headroom = a.ep_headroom;
  }
  e.fits = e.memory.total() <= e.memory_limit;

  const double tokens = double(global_batch) * m.seq_len;
  e.mfu = training_flops_per_token(m) * tokens / (e.step_s * l.world() * c.accel.bf16_flops);
  e.tokens_per_s_per_accel = tokens / e.step_s / l.world();
  return e;
}

}  // namespace mt::plan
