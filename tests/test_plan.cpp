// The planner: cluster profiles, the step model against published runs, and the search.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "config/config.hpp"
#include "pipeline/generators.hpp"
#include "plan/search.hpp"
#include "test_helpers.hpp"
#include "model/flops.hpp"

using namespace mt::plan;
using mt::pipeline::Kind;
using testing::contains;
using testing::user_error_of;

namespace {

const char* kDeepSeekLayout = "tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=selective,fp8=on";

// A GPT of Narayanan et al. 2021 (Table 1): MHA, 4h FFN as SwiGLU of equal size, vocab 51200, s 2048.
mt::ModelConfig megatron_gpt(int heads, int hidden, int layers) {
  mt::ModelConfig m;
  m.vocab_size = 51200;
  m.d_model = hidden;
  m.n_layers = layers;
  m.n_dense_layers = layers;
  m.n_heads = heads;
  m.head_dim = hidden / heads;
  // SwiGLU's 8h/3 keeps the 4h MLP's parameters; rounded to 128 so that every tensor-parallel
  // split of the table divides it, as the trainer needs.
  m.ffn_hidden = 128 * static_cast<int>(std::lround(8.0 * hidden / 3 / 128));
  m.seq_len = 2048;
  m.mtp.depth = 0;
  return m;
}

}  // namespace

TEST_CASE("every shipped cluster profile loads and names a source for every number") {
  int profiles = 0;
  for (const auto& f : std::filesystem::directory_iterator("configs/clusters")) {
    CAPTURE(f.path().string());
    Cluster c = load_cluster(f.path().string());
    CHECK(c.accel.bf16_flops > 0);
    ++profiles;
    std::ifstream in(f.path());
    const std::regex number_line(R"(^\s*\w+\s*=\s*[-0-9.e\[])");
    std::string previous;
    for (std::string line; std::getline(in, line); previous = line) {
      if (!std::regex_search(line, number_line)) continue;
      // A number is sourced on its own line or in the comment block just above it.
      bool sourced = line.find('#') != std::string::npos || previous.rfind("#", 0) == 0;
      CHECK_MESSAGE(sourced, line);
    }
  }
  CHECK(profiles >= 5);
}

TEST_CASE("cluster profile errors name the file, the key and what is valid") {
  const std::string dir = testing::temp_dir("cluster");
  std::ifstream src("configs/clusters/h800-deepseek.toml");
  std::string text((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& body) {
    std::ofstream(dir + "/c.toml") << body;
    return user_error_of([&] { load_cluster(dir + "/c.toml"); });
  };
  const auto bus_line = 1 + std::count(text.begin(), text.begin() + long(text.find("\nbus = 0.8")) + 1, '\n');
  CHECK(contains(write(std::regex_replace(text, std::regex("bus = 0.8"), "bus = 1.8")),
                 "c.toml:" + std::to_string(bus_line) + ":7: efficiency.bus = 1.800000 is outside [0.010000, 1.000000]"));
  CHECK(contains(write(std::regex_replace(text, std::regex("kind = \"switched\""), "kind = \"mesh\"")),
                 "topology.kind = \"mesh\" is not one of switched, torus"));
  CHECK(contains(write(text + "\n[extra]\nspeed = 3\n"), "unknown key 'extra.speed'"));
  CHECK(contains(write(std::regex_replace(text, std::regex("domain = 8 "), "# domain")),
                 "missing key 'scale_up.domain'"));
  CHECK(contains(user_error_of([&] { load_cluster(dir + "/none.toml"); }), "none.toml: cannot open"));
}

TEST_CASE("DeepSeek-V3 on 2048 H800 with DeepSeek's layout against the published step") {
  mt::Config cfg = mt::load_config("configs/deepseek-v3.toml", {});
  Cluster c = load_cluster("configs/clusters/h800-deepseek.toml");
  Layout l = parse_layout(kDeepSeekLayout, 2048);
  l.ep_receive_bound = cfg.parallel.ep_receive_bound;  // the experiment's room for expert-parallel arrivals
  CHECK(l.dp == 128);
  REQUIRE(layout_problem(cfg.model, cfg.training.global_batch, c, l).empty());
  Estimate e = estimate_step(cfg.model, cfg.training.global_batch, c, l);
  CHECK(e.fits);
  CHECK(e.microbatches == 120);
  CHECK(e.peak_live_chunks == 17);  // PP+1
  // Published (DeepSeek ISCA'25 Table 4): 19.93 s per step, bubble 2.06 s, 38.9% causal MFU
  // without MTP.
  CHECK(std::abs(e.time.bubble / 2.06 - 1) < 0.25);
  CHECK(std::abs(e.step_s / 19.93 - 1) < 0.10);
  mt::ModelConfig no_mtp = cfg.model;
  no_mtp.mtp.depth = 0;
  double mfu = mt::training_flops_per_token(no_mtp) * 15360.0 * 4096 / (e.step_s * 2048 * c.accel.bf16_flops);
  CHECK(std::abs(mfu / 0.389 - 1) < 0.10);
  // The parts add up to the step.
  const Breakdown& t = e.time;
  CHECK(t.compute + t.tp + t.cp + t.ep + t.imbalance + t.bubble + t.dp + t.optimizer == doctest::Approx(e.step_s));
  // Whole layers and the heavy output heads do not split evenly over 16 stages.
  CHECK(e.stage_imbalance > 1.02);
  CHECK(e.stage_imbalance < 1.2);
}

TEST_CASE("Megatron-LM 2021 Table 1: every row within 15% from two global factors") {
  Cluster c = load_cluster("configs/clusters/a100-selene.toml");
  struct Row {
    int heads, hidden, layers, tp, pp, dp, batch;
    double tflops;
  };
  const Row rows[] = {{24, 2304, 24, 1, 1, 32, 512, 137},    {32, 3072, 30, 2, 1, 32, 512, 138},
                      {32, 4096, 36, 4, 1, 32, 512, 142},    {48, 6144, 40, 8, 1, 32, 1024, 135},
                      {64, 8192, 48, 8, 2, 32, 1536, 138},   {80, 10240, 60, 8, 4, 32, 1792, 140},
                      {96, 12288, 80, 8, 8, 24, 2304, 148},  {128, 16384, 96, 8, 16, 15, 2160, 155},
                      {128, 20480, 105, 8, 35, 9, 2520, 163}, {160, 25600, 128, 8, 64, 6, 3072, 163}};
  std::vector<double> errors;
  for (const Row& r : rows) {
    mt::ModelConfig m = megatron_gpt(r.heads, r.hidden, r.layers);
    // Table 1 does not give micro-batch sizes or schedules: take the planner's best of what
    // Megatron-LM offered (1F1B or interleaved), with full recomputation and plain all-reduce.
    double best = 1e30;
    for (int mbs : {1, 2, 4, 8})
      for (auto [kind, vpp] : std::vector<std::pair<Kind, int>>{{Kind::one_f_one_b, 1}, {Kind::interleaved, 2}, {Kind::interleaved, 4}}) {
        Layout l{r.dp, r.tp, r.pp, 1, vpp, 0, kind, mbs, mt::Recompute::full, false};
        if (!layout_problem(m, r.batch, c, l).empty()) continue;
        Estimate e = estimate_step(m, r.batch, c, l);
        if (e.fits) best = std::min(best, e.step_s);
      }
    REQUIRE(best < 1e30);
    // Narayanan et al. eq. (3): FLOPs with the recomputed forward, non-causal attention.
    const double s = 2048, h = r.hidden, L = r.layers, V = 51200;
    const double flops = 96.0 * r.batch * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    errors.push_back(flops / best / (r.tp * r.pp * r.dp) / 1e12 / r.tflops - 1);
  }
  for (size_t i = 0; i < errors.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(errors[i]) < 0.15);
  }
}

TEST_CASE("the search picks a pipeline for DeepSeek-V3 on H800 that beats the best layout without one by more than its bubble, at most 4 stages on GB200 NVL72, none for Llama-3-70B on a v5p pod") {
  mt::Config ds = mt::load_config("configs/deepseek-v3.toml", {});
  const FixedSettings fixed{ds.parallel.ep_receive_bound, 0, {}};
  SearchResult h800 = search_layouts(ds.model, ds.training.global_batch,
                                     load_cluster("configs/clusters/h800-deepseek.toml"), 2048, true, 1, fixed);
  REQUIRE(!h800.ranked.empty());
  // On 8-GPU NVLink nodes joined by InfiniBand the pipeline pays for itself (DeepSeek-V3 report
  // §3.2): the best layout has one, and the best without one loses more than its bubble.
  const Estimate& best = h800.ranked[0];
  CHECK(best.layout.pp >= 2);
  const auto flat = std::find_if(h800.ranked.begin(), h800.ranked.end(), [](const Estimate& e) { return e.layout.pp == 1; });
  REQUIRE(flat != h800.ranked.end());
  CHECK(flat->step_s - best.step_s > best.time.bubble);
  CHECK(h800.too_big > 0);
  for (size_t i = 1; i < h800.ranked.size(); ++i) CHECK(h800.ranked[i - 1].step_s <= h800.ranked[i].step_s);

  SearchResult nvl72 = search_layouts(ds.model, ds.training.global_batch,
                                      load_cluster("configs/clusters/gb200-nvl72.toml"), 2048, true, 1, fixed);
  REQUIRE(!nvl72.ranked.empty());
  CHECK(nvl72.ranked[0].layout.pp <= 4);

  mt::Config llama = mt::load_config("configs/llama3-70b.toml", {});
  SearchResult tpu = search_layouts(llama.model, llama.training.global_batch, load_cluster("configs/clusters/tpu-v5p-pod.toml"), 4096, false);
  REQUIRE(!tpu.ranked.empty());
  CHECK(tpu.ranked[0].layout.pp == 1);
}

TEST_CASE("full recomputation keeps each layer's input, split tp ways under sequence parallelism") {
  // Llama-3-70B at tp=8 x pp=4 with full recomputation: the 20 layer inputs per stage and micro-batch
  // (2 d bytes per token each) are most of what a rank keeps; sequence parallelism keeps 1/8 of them.
  mt::Config llama = mt::load_config("configs/llama3-70b.toml", {});
  const Cluster c = load_cluster("configs/clusters/h100-superpod.toml");
  auto activations = [&](const std::string& layout) {
    return estimate_step(llama.model, llama.training.global_batch, c, parse_layout(layout, 1024)).memory.activations;
  };
  const double whole = activations("tp=8,pp=4,recompute=full"), split = activations("tp=8,pp=4,recompute=full,sp=on");
  CAPTURE(whole);
  CAPTURE(split);
  CHECK(split < 0.4 * whole);
  // Without recomputation the saved activations were split already (the cost model assumes it).
  CHECK(activations("tp=8,pp=4") == activations("tp=8,pp=4,sp=on"));
}

TEST_CASE("the planner's pipeline extension: makespans grow linearly with micro-batches past 2*pp") {
  mt::pipeline::Costs c;
  c.forward = 1.3;
  c.backward = 2.9;
  c.input_grad = 1.6;
  c.weight_grad = 1.3;
  c.overlapped = 3.5;
  c.latency = 0.05;
  for (auto [kind, vpp] : std::vector<std::pair<Kind, int>>{{Kind::gpipe, 1}, {Kind::one_f_one_b, 1}, {Kind::interleaved, 2},
                                                           {Kind::zb_h1, 1}, {Kind::dualpipe, 1}, {Kind::dualpipev, 1}})
    for (int pp : {2, 4, 8}) {
      CAPTURE(mt::pipeline::kind_name(kind));
      CAPTURE(pp);
      auto makespan = [&](int m) {
        return mt::pipeline::simulate(mt::pipeline::make_schedule({kind, pp, m, vpp}), c).makespan;
      };
      // Two short simulations give the steady-state period; the long one lies on their line.
      const double a = makespan(2 * pp), b = makespan(4 * pp);
      CHECK(makespan(10 * pp) == doctest::Approx(b + 3 * (b - a)));
    }
}

TEST_CASE("layout rules and memory accounting") {
  mt::Config cfg = mt::load_config("configs/deepseek-v3.toml", {});
  Cluster c = load_cluster("configs/clusters/h800-deepseek.toml");
  const int batch = cfg.training.global_batch;
  auto problem = [&](const std::string& text) { return layout_problem(cfg.model, batch, c, parse_layout(text, 2048)); };
  CHECK(contains(problem("tp=16,pp=16"), "tp = 16 spans scale-up domains of 8"));
  CHECK(contains(problem("pp=16,ep=3"), "ep = 3 does not divide dp*tp*cp = 128"));
  CHECK(contains(problem("pp=16,schedule=dualpipe,mbs=32"), "dp*mbs = 4096 does not divide the global batch"));
  CHECK(contains(problem("pp=16,zero=3"), "zero=3 (FSDP) with a pipeline schedule"));
  CHECK(contains(problem("pp=1,tp=8,schedule=dualpipev,zero=3"), "zero=3 (FSDP) with a pipeline schedule"));
  CHECK(problem("pp=1,tp=8,zero=3").empty());
  CHECK(problem("pp=1,tp=8,sp").empty());
  CHECK(contains(user_error_of([] { parse_layout("tp=2,pp=x", 2048); }), "'pp=x': pp must be an integer >= 1"));
  CHECK(contains(user_error_of([] { parse_layout("speed=2", 2048); }), "unknown key; valid keys are dp, tp"));
  CHECK(contains(user_error_of([] { parse_layout("tp=3", 2048); }), "tp*cp*pp = 3 does not divide 2048"));

  // DualPipe keeps two stages per rank: twice 1F1B's weights. ZeRO-1 shards the optimizer.
  auto est = [&](const std::string& text) { return estimate_step(cfg.model, batch, c, parse_layout(text, 2048)); };
  Estimate one = est("pp=16,ep=64,schedule=1f1b,zero=0");
  Estimate dual = est("pp=16,ep=64,schedule=dualpipe,zero=0");
  CHECK(dual.memory.weights == doctest::Approx(2 * one.memory.weights));
  Estimate sharded = est("pp=16,ep=64,schedule=1f1b,zero=1");
  CHECK(sharded.memory.optimizer < one.memory.optimizer / 1.9);
  CHECK(sharded.memory.weights == doctest::Approx(one.memory.weights));
  // Selective recomputation stores less than none; full stores less than selective.
  Estimate none = est("pp=16,ep=64,recompute=none"), sel = est("pp=16,ep=64,recompute=selective"),
           full = est("pp=16,ep=64,recompute=full");
  CHECK(sel.memory.activations < none.memory.activations);
  CHECK(full.memory.activations < sel.memory.activations);
  CHECK(full.time.compute > none.time.compute);
}

TEST_CASE("a layout as printed parses back to itself, for every layout a search proposes") {
  mt::Config cfg = mt::load_config("configs/deepseek-v3-small.toml", {});
  SearchResult found = search_layouts(cfg.model, cfg.training.global_batch, load_cluster("configs/clusters/h100-superpod.toml"), 64, true);
  REQUIRE(found.ranked.size() > 10);
  for (const Estimate& e : found.ranked) {
    const std::string text = layout_text(e.layout);
    CAPTURE(text);
    const Layout back = parse_layout(text, 64);
    CHECK(layout_text(back) == text);
    CHECK(back.world() == e.layout.world());
    CHECK(back.scheduled() == e.layout.scheduled());
  }
  // The cost model splits activations by sequence parallelism under tp, so every layout it proposes
  // with tp > 1 asks train for it.
  int with_tp = 0;
  for (const Estimate& e : found.ranked) {
    CHECK(e.layout.sp == (e.layout.tp > 1));
    with_tp += e.layout.tp > 1;
    const std::vector<std::string> sets = mt::train_sets(e.layout);
    CHECK(std::count(sets.begin(), sets.end(), e.layout.tp > 1 ? "parallel.sequence_parallel=true"
                                                                : "parallel.sequence_parallel=false") == 1);
  }
  CHECK(with_tp > 0);
  const Layout sp = parse_layout("tp=2,sp=on,mbs=2", 8);
  CHECK(sp.sp);
  CHECK(layout_text(sp) == "dp=4 tp=2 pp=1 ep=1 sp zero=1 mbs=2 recompute=none");
  CHECK(!parse_layout("tp=2,sp=off", 8).sp);
  CHECK(contains(user_error_of([] { parse_layout("tp=1 sp", 8); }), "sp (sequence parallelism) needs tp > 1"));
  CHECK(contains(user_error_of([] { parse_layout("tp=2 sp=yes", 8); }), "sp must be on or off"));
  Layout fp32 = parse_layout("dp=2 tp=1 pp=2 ep=1 zb-h1 zero=1 mbs=4 recompute=full fp8 storage=fp32", 4);
  CHECK(fp32.schedule == Kind::zb_h1);
  CHECK(fp32.fp8);
  CHECK(fp32.storage == mt::Storage::fp32);
  CHECK(fp32.recompute == mt::Recompute::full);
}

TEST_CASE("every proposed layout's printed parts sum to its step, over the shipped configs and clusters") {
  const char* configs[] = {"configs/tiny.toml", "configs/moe-1b.toml", "configs/deepseek-v3-small.toml",
                           "configs/deepseek-v3.toml", "configs/llama3-70b.toml"};
  std::vector<std::string> clusters;
  for (const auto& f : std::filesystem::directory_iterator("configs/clusters")) clusters.push_back(f.path().string());
  std::sort(clusters.begin(), clusters.end());
  REQUIRE(clusters.size() >= 9);
  size_t checked = 0, with_cp = 0;
  double worst = 0;
  for (const char* path : configs) {
    const mt::Config cfg = mt::load_config(path, {});
    for (const std::string& cluster_path : clusters) {
      const Cluster c = load_cluster(cluster_path);
      for (int gpus : {64, 2048})
        for (bool fp8 : {false, true}) {
          if (gpus > c.accelerators) continue;
          // Context parallelism too, on the smaller count.
          for (const Estimate& e : search_layouts(cfg.model, cfg.training.global_batch, c, gpus, fp8, gpus == 64 ? 4 : 1).ranked) {
            const Breakdown& t = e.time;
            const double parts = t.compute + t.tp + t.cp + t.ep + t.imbalance + t.bubble + t.dp + t.optimizer;
            with_cp += e.layout.cp > 1;
            const double off = std::abs(parts - e.step_s) / e.step_s;
            if (off > worst) {
              worst = off;
              const std::string where = std::string(path) + " on " + cluster_path + ": " + mt::layout_text(e.layout) +
                                        " step " + std::to_string(e.step_s) + " parts " + std::to_string(parts);
              CAPTURE(where);
              CHECK(off < 1e-9);
            }
            ++checked;
          }
        }
    }
  }
  MESSAGE(checked << " layouts checked (" << with_cp << " with context parallelism), worst relative gap " << worst);
  CHECK(checked > 1000);
  CHECK(with_cp > 1000);
}

TEST_CASE("expert-data-parallel replicas ep ranks apart sum their gradients across domains") {
  // DeepSeek-V3 at dp=2048 ep=64 on H800 nodes of 8: the 32 replicas of each expert sit 64 ranks
  // apart, each in another node, so their all-reduce of 2-byte gradients crosses InfiniBand whole.
  mt::Config ds = mt::load_config("configs/deepseek-v3.toml", {});
  const Cluster c = load_cluster("configs/clusters/h800-deepseek.toml");
  const Estimate e = estimate_step(ds.model, ds.training.global_batch, c, parse_layout("tp=1,pp=1,ep=64,zero=0", 2048));
  const double replicas = 2048 / 64, bytes = 2.0 * mt::routed_expert_params(ds.model) / 64;
  const double across = 2.0 * (replicas - 1) / replicas * bytes / c.scale_out_bandwidth / c.bus_efficiency;
  CAPTURE(e.time.dp);
  CAPTURE(across);
  CHECK(e.time.dp >= across);
}
