// The planner against its validation set (configs/published/runs.toml) and the parts of the step
// model the set exercises: FP8 by kernel class, expert GEMMs, per-profile efficiencies, software
// overlap and context parallelism.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "config/config.hpp"
#include "plan/chunk_compute.hpp"
#include "plan/published.hpp"
#include "plan/search.hpp"
#include "test_helpers.hpp"

using namespace mt::plan;
using testing::contains;
using testing::user_error_of;

namespace {

const std::vector<PublishedRun>& runs() {
  static const std::vector<PublishedRun> all = load_published_runs("configs/published/runs.toml");
  return all;
}
const std::vector<CheckedRun>& checked() {
  static const std::vector<CheckedRun> all = check_published_runs(runs());
  return all;
}
const CheckedRun& named(const std::string& name) {
  for (const CheckedRun& c : checked())
    if (c.run->name == name) return c;
  FAIL("no published run named " << name);
  throw;
}

}  // namespace

TEST_CASE("the validation set: 30+ cited runs on three GPU vendors and TPUs, dense and MoE, BF16 and FP8, 70% within 20%") {
  REQUIRE(runs().size() >= 30);
  std::set<std::string> vendors, kinds, precisions;
  for (const PublishedRun& r : runs()) {
    CAPTURE(r.name);
    CHECK(r.source.size() > 20);
    CHECK(r.step_s > 0);
    vendors.insert(r.cluster.accel.vendor);
    kinds.insert(r.group);
    precisions.insert(r.layout.fp8 ? "fp8" : "bf16");
  }
  CHECK(vendors == std::set<std::string>{"AMD", "Google", "Intel", "NVIDIA"});
  CHECK(kinds == std::set<std::string>{"dense", "moe"});
  CHECK(precisions == std::set<std::string>{"bf16", "fp8"});

  // 146 of the 203 runs within 20% (docs/planner.md says which families miss and why).
  CHECK(share_within(checked(), 0.20) >= 0.71);
  std::vector<CheckedRun> unfitted;
  for (const CheckedRun& c : checked())
    if (!c.run->calibration) unfitted.push_back(c);
  CHECK(unfitted.size() >= 40);
  CHECK(share_within(unfitted, 0.20) >= 0.64);
  // A profile fitted to one run reproduces it; A100's two factors, fitted to the ten rows of
  // Megatron-LM 2021's Table 1 together, hold each within 15%.
  std::map<std::string, std::vector<const CheckedRun*>> fitted;
  for (const CheckedRun& c : checked())
    if (c.run->calibration) fitted[c.run->cluster.path].push_back(&c);
  REQUIRE(fitted.size() >= 5);
  for (const auto& [profile, list] : fitted)
    for (const CheckedRun* c : list) {
      CAPTURE(c->run->name);
      CHECK(std::abs(c->error) < (list.size() == 1 ? 0.01 : 0.15));
    }
}

TEST_CASE("FP8's gain follows the model: every same-layout BF16/FP8 pair published, dense ones within 10% (torchtitan 15%)") {
  // Pairs: the same model, accelerators and layout in BF16 and in FP8.
  struct Pair {
    const CheckedRun *bf16 = nullptr, *fp8 = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const CheckedRun& c : checked()) {
    mt::plan::Layout l = c.run->layout;
    l.fp8 = false;
    // The same step in one publication: its source before the parenthesis, model, sequence,
    // batch, accelerators and layout, and whether tensor parallelism ran async (torchtitan's
    // benchmark publishes each pair both ways).
    const std::string publication = c.run->source.substr(0, c.run->source.find(" ("));
    const std::string key = publication + "/" + c.run->model_name + "/" + std::to_string(c.run->model.seq_len) +
                            "/" + std::to_string(c.run->global_batch) + "/" + c.run->cluster.accel.name + "/" +
                            layout_text(l) + (c.run->cluster.overlap_tp ? " async-tp" : "");
    (c.run->layout.fp8 ? pairs[key].fp8 : pairs[key].bf16) = &c;
  }
  int n_dense = 0, n_moe = 0;
  for (const auto& [key, p] : pairs) {
    if (!p.bf16 || !p.fp8) continue;
    CAPTURE(key);
    const double published = p.bf16->run->step_s / p.fp8->run->step_s;
    const double predicted = p.bf16->estimate.step_s / p.fp8->estimate.step_s;
    // Megatron-Bridge 25.11's DeepSeek-V3 on GB300 gains the least: 1.13x from MXFP8.
    CHECK(published > 1.12);
    const bool moe = p.bf16->run->group == "moe";
    // MoE pairs: NVIDIA's MoE runs gain less from FP8 (1.20-1.24x) than the model says (docs/planner.md).
    // torchtitan's kernel factor is one for both precisions, fitted to its BF16 and FP8 runs
    // together: its Llama 3 8B pair at tp=8 (small per-rank GEMMs) gains 1.16x where the model says 1.32x.
    const bool titan = p.bf16->run->trainer == "torchtitan";
    CHECK(std::abs(predicted / published - 1) < (moe ? 0.25 : titan ? 0.15 : 0.10));
    (moe ? n_moe : n_dense) += 1;
  }
  CHECK(n_dense >= 6);
  CHECK(n_moe >= 2);
}

TEST_CASE("expert GEMMs with few rows are bound by HBM; FP8 pays for quantizing its operands and keeps attention in BF16") {
  const Cluster c = load_cluster("configs/clusters/h100-superpod.toml");
  const double bf16 = c.accel.bf16_flops * c.matmul_efficiency_bf16, fp8 = c.accel.fp8_flops * c.matmul_efficiency_fp8;
  CHECK(gemm_roofline(8192, 7168, 4096, 2, bf16, c.accel.hbm_bandwidth) == 1.0);
  const double small_bf16 = gemm_roofline(64, 7168, 4096, 2, bf16, c.accel.hbm_bandwidth);
  const double small_fp8 = gemm_roofline(64, 7168, 4096, 1, fp8, c.accel.hbm_bandwidth);
  CHECK(small_bf16 < 0.5);
  CHECK(small_fp8 < 0.6);

  // DeepSeek-V3 at 1024 tokens per micro-batch: 32 rows per expert without expert parallelism,
  // 2048 across 64 ranks.
  mt::ModelConfig m = mt::load_config("configs/deepseek-v3.toml", {}).model;
  mt::plan::Layout l = parse_layout("tp=1 pp=1 ep=1 mbs=1 fp8", 64);
  CHECK(rows_per_expert(m, l, 1024) == doctest::Approx(32));
  const ChunkCompute few = chunk_compute(m, c, l, 1024, 1);
  l.ep = 64;
  CHECK(rows_per_expert(m, l, 1024) == doctest::Approx(2048));
  const ChunkCompute many = chunk_compute(m, c, l, 1024, 1);
  CHECK(few.forward > 1.1 * many.forward);

  // FP8 quantization and the BF16 attention core and head: FP8 is well under twice as fast as BF16.
  mt::ModelConfig llama = mt::load_config("configs/llama3-70b.toml", {}).model;
  mt::plan::Layout dense = parse_layout("tp=8 sp pp=1", 8);
  const ChunkCompute b = chunk_compute(llama, c, dense, 8192, 1);
  dense.fp8 = true;
  const ChunkCompute f = chunk_compute(llama, c, dense, 8192, 1);
  CHECK(f.forward < b.forward);
  CHECK(f.forward - f.linear_gemms > b.forward - b.linear_gemms);  // the quantization passes
  CHECK(f.attention == doctest::Approx(b.attention));
}

TEST_CASE("every profile's matrix efficiency has its own source: TPUs and H100 fitted or transferred, not A100's") {
  std::map<std::string, double> efficiency;
  for (const char* name : {"h100-superpod", "h800-deepseek", "tpu-v4-palm", "tpu-v5p-pod", "tpu-v6e-256", "gaudi2", "mi250x-frontier"})
    efficiency[name] = load_cluster(std::string("configs/clusters/") + name + ".toml").matmul_efficiency_bf16;
  for (const auto& [name, e] : efficiency) {
    CAPTURE(name);
    CHECK(e != doctest::Approx(0.63));
  }
  // TPUs realize more of their peak than GPUs do (MaxText's published runs).
  CHECK(efficiency["tpu-v5p-pod"] > efficiency["h100-superpod"]);
  // The TPU runs of the set.
  std::vector<CheckedRun> tpu;
  for (const CheckedRun& c : checked())
    if (c.run->cluster.accel.vendor == "Google") tpu.push_back(c);
  REQUIRE(tpu.size() >= 8);
  CHECK(share_within(tpu, 0.25) >= 0.75);
  // H100 in BF16: NVIDIA's dense benchmarks, none of them fitted.
  std::vector<double> errors;
  for (const CheckedRun& c : checked())
    if (c.run->cluster.accel.name == "H100 SXM" && c.run->group == "dense" && !c.run->layout.fp8)
      errors.push_back(std::abs(c.error));
  REQUIRE(errors.size() >= 8);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[errors.size() / 2] < 0.05);
}

TEST_CASE("software overlap: tensor-parallel collectives behind GEMMs, gradients behind the last backward, all-to-alls behind the other micro-batch") {
  Cluster c = load_cluster("configs/clusters/h100-superpod.toml");
  mt::ModelConfig m = mt::load_config("configs/llama3-70b.toml", {}).model;
  const mt::plan::Layout l = parse_layout("tp=8 sp pp=1 zero=1 mbs=1", 64);
  c.overlap_tp = c.overlap_dp = false;
  const Estimate plain = estimate_step(m, 512, c, l);
  c.overlap_tp = true;
  const Estimate tp = estimate_step(m, 512, c, l);
  c.overlap_dp = true;
  const Estimate both = estimate_step(m, 512, c, l);
  CHECK(plain.time.tp > 0);
  CHECK(tp.time.tp < 0.5 * plain.time.tp);
  CHECK(plain.time.dp > 0);
  CHECK(both.time.dp < tp.time.dp);
  CHECK(both.step_s < tp.step_s);
  CHECK(tp.step_s < plain.step_s);
  // Expert-parallel ranks are adjacent positions of a stage: at tp=2, ep=8 stays in an 8-GPU
  // node and moves nothing over InfiniBand; ep=32 spans four nodes.
  mt::ModelConfig moe = mt::load_config("configs/deepseek-v3.toml", {}).model;
  Cluster h800 = load_cluster("configs/clusters/h800-deepseek.toml");
  const Estimate in_node = estimate_step(moe, 15360, h800, parse_layout("tp=2 sp pp=16 ep=8 1f1b zero=1 fp8", 2048));
  const Estimate two_nodes = estimate_step(moe, 15360, h800, parse_layout("tp=2 sp pp=16 ep=32 1f1b zero=1 fp8", 2048));
  h800.scale_out_bandwidth /= 10;
  CHECK(estimate_step(moe, 15360, h800, parse_layout("tp=2 sp pp=16 ep=8 1f1b zero=1 fp8", 2048)).time.ep ==
        doctest::Approx(in_node.time.ep));
  CHECK(estimate_step(moe, 15360, h800, parse_layout("tp=2 sp pp=16 ep=32 1f1b zero=1 fp8", 2048)).time.ep >
        2 * two_nodes.time.ep);
  // Qwen3-235B on 256 H100, with and without Megatron's 1F1B all-to-all overlap.
  const CheckedRun& without = named("Qwen3-235B-A22B, 256 H100, BF16, Megatron-Core");
  const CheckedRun& with = named("Qwen3-235B-A22B, 256 H100, BF16, with 1F1B all-to-all overlap");
  CHECK(with.estimate.time.ep < 0.5 * without.estimate.time.ep);
  CHECK(with.estimate.step_s < without.estimate.step_s);
}

TEST_CASE("context parallelism: a layout entry, 1/cp of the tokens per rank, a ring of keys and values, searched on request") {
  const mt::plan::Layout l = parse_layout("tp=4 sp cp=2 pp=4 interleaved vpp=5", 64);
  CHECK(l.dp == 2);
  CHECK(l.world() == 64);
  CHECK(contains(layout_text(l), " cp=2"));
  const mt::plan::Layout again = parse_layout(layout_text(l), 64);
  CHECK(again.cp == 2);
  CHECK(again.dp == 2);
  CHECK(contains(user_error_of([] { parse_layout("tp=8 cp=3", 64); }), "tp*cp*pp = 24 does not divide 64"));

  const Cluster c = load_cluster("configs/clusters/h100-superpod.toml");
  mt::ModelConfig m = mt::load_config("configs/llama3-70b.toml", {}).model;
  CHECK(contains(layout_problem(m, 64, c, parse_layout("tp=8 cp=3", 48)), "must split into 2*cp equal pieces"));
  // Splitting the sequence halves what each rank keeps, but for the logits' one chunk of 4096 tokens
  // (model.head_chunk_tokens), FP32 and split by vocabulary over tp = 8, the same either way.
  const Estimate one = estimate_step(m, 64, c, parse_layout("tp=8 sp pp=1 zero=1 recompute=none", 16));
  const Estimate two = estimate_step(m, 64, c, parse_layout("tp=8 sp cp=2 pp=1 zero=1 recompute=none", 16));
  const double chunk = 4.0 * m.vocab_size * m.head_chunk_tokens / 8;
  CHECK(two.memory.activations - chunk == doctest::Approx((one.memory.activations - chunk) / 2).epsilon(0.01));
  CHECK(two.time.cp == 0);  // at 8192 tokens attention hides the ring
  // Short sequences over many ranks: the ring is exposed.
  mt::ModelConfig short_seq = m;
  short_seq.seq_len = 512;
  const Estimate wide = estimate_step(short_seq, 64, c, parse_layout("tp=8 sp cp=16 pp=1 zero=1", 128));
  CHECK(wide.time.cp > 0);
  CHECK(wide.time.compute + wide.time.tp + wide.time.cp + wide.time.ep + wide.time.imbalance + wide.time.bubble +
            wide.time.dp + wide.time.optimizer ==
        doctest::Approx(wide.step_s));
  // NVIDIA's Llama 3.1 70B benchmark runs cp=2.
  CHECK(std::abs(named("Llama 3.1 70B, 64 H100, BF16, NeMo").error) < 0.10);
  // 128K tokens per sequence on 512 H100: only context parallelism gets near full speed.
  m.seq_len = 131072;
  const SearchResult plain = search_layouts(m, 32, c, 512, false);
  const SearchResult with_cp = search_layouts(m, 32, c, 512, false, 16);
  REQUIRE(!with_cp.ranked.empty());
  CHECK(with_cp.ranked[0].layout.cp > 1);
  for (const Estimate& e : plain.ranked) CHECK(e.layout.cp == 1);
  REQUIRE(!plain.ranked.empty());
  CHECK(with_cp.ranked[0].step_s < 0.8 * plain.ranked[0].step_s);
}

TEST_CASE("runs file errors name the file, the position, the key and what is valid") {
  const std::string dir = testing::temp_dir("runs");
  auto write = [&](const std::string& body) {
    std::ofstream(dir + "/runs.toml") << body;
    return user_error_of([&] { load_published_runs(dir + "/runs.toml"); });
  };
  const std::string model = "[models.m]\nsource = \"a paper\"\nvocab_size = 1000\nd_model = 256\nn_layers = 2\nn_dense_layers = 2\n"
                            "n_heads = 4\nhead_dim = 64\nffn_hidden = 512\nseq_len = 256\n";
  const std::string run = "[[runs]]\nname = \"r\"\nsource = \"a paper, table 1\"\norigin = \"paper-table1\"\n"
                          "trainer = \"megatron\"\nmodel = \"m\"\ncluster = \"" +
                          std::filesystem::absolute("configs/clusters/h100-superpod.toml").string() +
                          "\"\ngpus = 8\nglobal_batch = 8\nlayout = \"dp=8 tp=1 pp=1\"\n";
  CHECK(write(model + run + "published = { step_s = 1.0 }\n").empty());
  CHECK(contains(write(model + run + "published = { speed = 1.0 }\n"), "published needs one of step_s"));
  CHECK(contains(write(model + run + "published = { mfu = 0.4 }\n"), "published.flops must say how the publisher counted FLOPs"));
  CHECK(contains(write(model + run + "colour = 1\npublished = { step_s = 1.0 }\n"), "unknown key 'colour' in a run"));
  CHECK(contains(write(model + run + "software = { overlap_xx = true }\npublished = { step_s = 1.0 }\n"),
                 "software.overlap_xx: valid are overlap_tp"));
  CHECK(contains(write(model + std::regex_replace(run, std::regex("model = \"m\""), "model = \"n\"") + "published = { step_s = 1.0 }\n"),
                 "model 'n' has no [models.n] table"));
  CHECK(contains(write(model + std::regex_replace(run, std::regex("gpus = 8"), "gpus = 16") + "published = { step_s = 1.0 }\n"),
                 "the layout uses 8 accelerators but gpus = 16"));
  CHECK(contains(user_error_of([&] { load_published_runs(dir + "/none.toml"); }), "none.toml: cannot open the runs file"));
}
