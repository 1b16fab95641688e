// The planner's named cost terms (plan/cost_terms.hpp): each is zero where its parallelism is off,
// memory shards as the ZeRO stage says, and estimate_step is their sum, to the bit.
#include <doctest/doctest.h>

#include "config/config.hpp"
#include "plan/cost_terms.hpp"

using namespace mt::plan;

namespace {

struct Case {
  mt::Config cfg = mt::load_config("configs/deepseek-v3.toml", {});
  Cluster cluster = load_cluster("configs/clusters/h800-deepseek.toml");
  const mt::ModelConfig& m() const { return cfg.model; }
  int batch() const { return cfg.training.global_batch; }
  Layout layout(const std::string& text) const { return parse_layout(text, 1024); }  // dp divides the global batch
};

}  // namespace

TEST_CASE("cost terms: each communication term is zero where its parallelism is off") {
  const Case k;
  const Layout flat = k.layout("tp=1,pp=1,ep=1,zero=1,mbs=1,recompute=full");
  REQUIRE(layout_problem(k.m(), k.batch(), k.cluster, flat).empty());
  const StepShape s = step_shape(k.m(), k.batch(), flat);
  const ChunkTimes t = chunk_times(k.m(), k.cluster, flat, s);
  CHECK(t.forward > 0);
  CHECK(t.backward > t.forward);  // full recomputation runs the forward again
  CHECK(t.input_grad == t.backward - t.weight_grad);
  for (const PassComm& p : {tensor_parallel_comm(k.m(), k.cluster, flat, s, t),
                            context_parallel_comm(k.m(), k.cluster, flat, s, t),
                            expert_parallel_comm(k.m(), k.cluster, flat, s, t)}) {
    CHECK(p.forward == 0);
    CHECK(p.backward == 0);
  }
  CHECK(pipeline_latency(k.m(), k.cluster, flat, s) == 0);

  const Layout split = k.layout("tp=2,pp=4,ep=8,cp=2,schedule=1f1b,zero=1,mbs=1,recompute=selective");
  REQUIRE(layout_problem(k.m(), k.batch(), k.cluster, split).empty());
  const StepShape s2 = step_shape(k.m(), k.batch(), split);
  const ChunkTimes t2 = chunk_times(k.m(), k.cluster, split, s2);
  CHECK(tensor_parallel_comm(k.m(), k.cluster, split, s2, t2).backward > 0);
  CHECK(context_parallel_comm(k.m(), k.cluster, split, s2, t2).backward >= 0);
  CHECK(expert_parallel_comm(k.m(), k.cluster, split, s2, t2).forward > 0);
  CHECK(pipeline_latency(k.m(), k.cluster, split, s2) > 0);
}

TEST_CASE("cost terms: ZeRO shards optimizer state, then gradients, then weights; per-chunk traffic from ZeRO-2") {
  const Case k;
  Memory by_stage[4];
  DataParallelTraffic dp_by_stage[4];
  for (int zero = 0; zero <= 3; ++zero) {
    const Layout l = k.layout("tp=1,pp=1,ep=64,zero=" + std::to_string(zero) + ",mbs=1,recompute=full");
    const StepShape s = step_shape(k.m(), k.batch(), l);
    const HeldParams h = held_params(k.m(), l, s);
    by_stage[zero] = state_memory(l, h);
    dp_by_stage[zero] = data_parallel_traffic(k.cluster, l, s, h);
  }
  CHECK(by_stage[1].optimizer < by_stage[0].optimizer);
  CHECK(by_stage[1].grads == by_stage[0].grads);
  CHECK(by_stage[2].grads < by_stage[1].grads);
  CHECK(by_stage[2].weights == by_stage[1].weights);
  CHECK(by_stage[3].weights < by_stage[2].weights);
  CHECK(dp_by_stage[1].per_chunk == 0);
  CHECK(dp_by_stage[2].per_chunk == 0.5 * dp_by_stage[2].full);
  CHECK(dp_by_stage[3].at_end == 0);
}

TEST_CASE("cost terms: estimate_step's step time is the pipeline's makespan, data-parallel and optimizer time") {
  const Case k;
  for (const char* text : {"tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=selective,fp8=on",
                           "tp=2,pp=4,ep=8,schedule=1f1b,zero=1,mbs=1,recompute=selective",
                           "tp=1,pp=1,ep=64,zero=2,mbs=3,recompute=full"}) {
    CAPTURE(text);
    const Layout l = k.layout(text);
    REQUIRE(layout_problem(k.m(), k.batch(), k.cluster, l).empty());
    const Estimate e = estimate_step(k.m(), k.batch(), k.cluster, l);
    const StepShape s = step_shape(k.m(), k.batch(), l);
    const ChunkTimes t = chunk_times(k.m(), k.cluster, l, s);
    const ChunkComm comm{tensor_parallel_comm(k.m(), k.cluster, l, s, t),
                         context_parallel_comm(k.m(), k.cluster, l, s, t),
                         expert_parallel_comm(k.m(), k.cluster, l, s, t)};
    const HeldParams h = held_params(k.m(), l, s);
    const DataParallelTraffic dp = data_parallel_traffic(k.cluster, l, s, h);
    const MicroBatchWork work = microbatch_work(l, s, t, comm, e.chunk_costs, e.stage_imbalance);
    ScheduleTimings timings;
    const PipelineTime pipe = pipeline_time(l, s, work, e.chunk_costs, timings);
    const double dp_time = data_parallel_time(k.cluster, l, s, t, dp);
    CHECK(e.step_s == pipe.makespan + dp_time + optimizer_time(k.cluster, l, h));
    CHECK(e.time.optimizer == optimizer_time(k.cluster, l, h));
    CHECK(e.time.compute == s.microbatches * work.compute);
  }
}
