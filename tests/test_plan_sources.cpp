// The planner's software profiles, its leave-one-source-out validation and its cost of Muon
// (plan/software.hpp, plan/source_holdout.hpp, plan/muon_cost.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "plan/collectives.hpp"
#include "plan/cost_terms.hpp"
#include "plan/search.hpp"
#include "plan/software.hpp"
#include "plan/source_holdout.hpp"
#include "test_helpers.hpp"

using namespace mt::plan;
using testing::contains;
using testing::user_error_of;

namespace {

// The shipped runs and their leave-one-source-out errors, computed once.
struct Shipped {
  std::vector<PublishedRun> runs = load_published_runs("configs/published/runs.toml");
  SourceHoldout held = leave_one_source_out(runs);
};
const Shipped& shipped() {
  static const Shipped s;
  return s;
}
const std::vector<PublishedRun>& runs() { return shipped().runs; }
const SourceHoldout& holdout() { return shipped().held; }
size_t index_of(const std::string& name) {
  for (size_t i = 0; i < runs().size(); ++i)
    if (runs()[i].name == name) return i;
  FAIL("no published run named " << name);
  return 0;
}
double in_sample_error(const PublishedRun& r) {
  return estimate_step(r.model, r.global_batch, r.cluster, r.layout).step_s / r.step_s - 1;
}

// Runs of `family` (all when empty): how many within 20% and the median error, held out or not.
struct Figures {
  size_t runs = 0, within = 0;
  double median = 0;
};
Figures figures(const std::string& family, bool held_out) {
  std::vector<double> e;
  for (size_t i = 0; i < runs().size(); ++i)
    if (family.empty() || family_of(runs()[i]) == family)
      e.push_back(held_out ? holdout().runs[i].error : in_sample_error(runs()[i]));
  std::sort(e.begin(), e.end());
  Figures f{e.size(), size_t(std::count_if(e.begin(), e.end(), [](double x) { return std::abs(x) <= 0.2; })), 0};
  f.median = e.size() % 2 ? e[e.size() / 2] : (e[e.size() / 2 - 1] + e[e.size() / 2]) / 2;
  return f;
}

}  // namespace

TEST_CASE("software profiles: each trainer's file, what it sets, and errors naming the valid trainers") {
  const SoftwareProfile titan = load_software("configs/software", "torchtitan");
  Cluster c = load_cluster("configs/clusters/h100-superpod.toml");
  REQUIRE(c.overlap_tp);
  titan.apply_to(c);
  CHECK_FALSE(c.overlap_tp);  // async TP is off by default in torchtitan
  CHECK(c.overlap_dp);
  CHECK(c.software == "torchtitan");
  // A profile sets only what it names: "other" leaves the cluster's software as it was.
  Cluster h800 = load_cluster("configs/clusters/h800-deepseek.toml"), same = h800;
  load_software("configs/software", "other").apply_to(same);
  CHECK(same.comm_sm_share == h800.comm_sm_share);
  CHECK(same.fp8_dispatch == h800.fp8_dispatch);
  for (const std::string& name : software_names()) CHECK(load_software("configs/software", name).name == name);
  CHECK(contains(user_error_of([] { load_software("configs/software", "nemo"); }),
                 "software \"nemo\" is not a known trainer; valid: moetrain, megatron, torchtitan"));
  const std::string dir = testing::temp_dir("software");
  std::ofstream(dir + "/maxtext.toml") << "[software]\nname = \"maxtext\"\noverlap_pp = true\n";
  CHECK(contains(user_error_of([&] { load_software(dir, "maxtext"); }),
                 "maxtext.toml:3:14: unknown key software.overlap_pp"));
  std::ofstream(dir + "/deepseek.toml") << "[software]\nname = \"deepseek\"\ncomm_sm_share = 2\n";
  CHECK(contains(user_error_of([&] { load_software(dir, "deepseek"); }), "comm_sm_share must be a number in [0, 0.9]"));
  std::ofstream(dir + "/other.toml") << "[software]\nname = \"other\"\nmatmul_factor = 0\n";
  CHECK(contains(user_error_of([&] { load_software(dir, "other"); }),
                 "other.toml:3:17: software.matmul_factor must be a number in [0.1, 1.5]"));
  // torchtitan's factor scales both of the cluster's matmul efficiencies, once.
  Cluster twice = load_cluster("configs/clusters/h100-superpod.toml");
  titan.apply_to(twice);
  titan.apply_to(twice);
  CHECK(twice.matmul_efficiency_bf16 == doctest::Approx(c.matmul_efficiency_bf16));
  CHECK(c.matmul_efficiency_fp8 ==
        doctest::Approx(load_cluster("configs/clusters/h100-superpod.toml").matmul_efficiency_fp8 * 0.602));
}

TEST_CASE("every published run names its source group and trainer; a run's trainer must be a profile") {
  for (const PublishedRun& r : runs()) {
    CHECK_FALSE(r.origin.empty());
    CHECK(r.cluster.software == r.trainer);
  }
  CHECK(runs()[index_of("DeepSeek-V3, 2048 H800, FP8 (DeepSeek)")].trainer == "deepseek");
  CHECK(runs()[index_of("DeepSeek-V3, 256 GB200, MXFP8, Megatron-Bridge")].trainer_release == "26.08");
  const std::string dir = testing::temp_dir("runs-trainer");
  std::ofstream(dir + "/runs.toml") << "[models.m]\nsource = \"a paper\"\nvocab_size = 1000\nd_model = 256\n"
                                       "n_layers = 2\nn_dense_layers = 2\nn_heads = 4\nhead_dim = 64\n"
                                       "ffn_hidden = 512\nseq_len = 256\n[[runs]]\nname = \"r\"\nsource = \"s\"\n"
                                       "origin = \"o\"\ntrainer = \"nemo\"\nmodel = \"m\"\ncluster = \"" +
                                           std::filesystem::absolute("configs/clusters/h100-superpod.toml").string() +
                                           "\"\ngpus = 8\nglobal_batch = 8\nlayout = \"dp=8\"\n"
                                           "published = { step_s = 1.0 }\n";
  const std::string why = user_error_of([&] { load_published_runs(dir + "/runs.toml"); });
  CHECK(contains(why, "runs.toml:11:1 (r): trainer: software \"nemo\" is not a known trainer; valid: moetrain"));
}

TEST_CASE("leave-one-source-out: a fitted efficiency is fitted again without the source of the run it predicts") {
  const SourceHoldout& h = holdout();
  // The fit done here reproduces the profiles' single-run fits.
  for (const FittedNumber& f : h.fitted)
    if (f.runs.size() == 1) CHECK(f.refit == doctest::Approx(f.shipped).epsilon(0.002));
  // DeepSeek's run is the only one on its profile: left out, its FP8 efficiency is the other FP8
  // fit's (H100's 0.463), and the run is predicted with that.
  const size_t ds = index_of("DeepSeek-V3, 2048 H800, FP8 (DeepSeek)");
  const PublishedRun& r = runs()[ds];
  Cluster c = r.cluster;
  c.matmul_efficiency_fp8 = 0.463;
  const double expected = estimate_step(r.model, r.global_batch, c, r.layout).step_s / r.step_s - 1;
  CHECK(h.runs[ds].error == doctest::Approx(expected));
  CHECK(std::abs(h.runs[ds].error - in_sample_error(r)) > 0.05);
  // Megatron-LM 2021's Table 1 left out: A100's BF16 efficiency comes from Table 2's runs.
  CHECK(std::any_of(h.refits.begin(), h.refits.end(), [](const std::string& s) {
    return contains(s, "narayanan2021-table1 left out: a100-selene.toml matmul_bf16") &&
           contains(s, "the profile's 9 other runs");
  }));
  // torchtitan's kernel factor: fitted to all 22 of its runs as shipped; its 2024-12 runs are
  // predicted with the factor fitted to its 2025-06 runs alone.
  REQUIRE(h.software.size() == 1);
  CHECK(h.software[0].trainer == "torchtitan");
  CHECK(h.software[0].runs.size() == 22);
  CHECK(h.software[0].refit == doctest::Approx(h.software[0].shipped).epsilon(0.002));
  std::vector<const PublishedRun*> june;
  for (const PublishedRun* r : h.software[0].runs)
    if (r->origin == "torchtitan-benchmarks-asynctp-202506") june.push_back(r);
  REQUIRE(june.size() == 8);
  const double factor = fit_software_factor(june, h.software[0].shipped);
  const size_t fsdp = index_of("Llama 3.1 8B, 8 H100, torchtitan FSDP");
  Cluster scaled = runs()[fsdp].cluster;
  scaled.matmul_efficiency_bf16 *= factor / h.software[0].shipped;
  scaled.matmul_efficiency_fp8 *= factor / h.software[0].shipped;
  const PublishedRun& f = runs()[fsdp];
  const double held_error = estimate_step(f.model, f.global_batch, scaled, f.layout).step_s / f.step_s - 1;
  CHECK(h.runs[fsdp].error == doctest::Approx(held_error));
  CHECK(std::abs(factor / h.software[0].shipped - 1) > 0.02);
  // A run whose profile was fitted to other sources keeps its error.
  const size_t gaudi = index_of("Llama 3.1 70B, 64 Gaudi 2, FP8");
  CHECK(h.runs[gaudi].error == doctest::Approx(in_sample_error(runs()[gaudi])));
}

TEST_CASE("leave-one-source-out figures by family (trainer and accelerator), beside the in-sample ones") {
  const Figures all_in = figures("", false), all_out = figures("", true);
  MESSAGE("in sample " << all_in.within << " of " << all_in.runs << ", left out " << all_out.within << " of "
                       << all_out.runs << ", median " << 100 * all_out.median << "%");
  CHECK(all_in.runs == 203);
  CHECK(all_in.within == 146);
  CHECK(all_out.within == 143);
  CHECK(std::abs(all_out.median) < 0.02);
  const Figures titan_free = figures("megatron H100 SXM", true), v6e = figures("maxtext TPU v6e", true);
  CHECK(titan_free.within == 44);
  CHECK(std::abs(titan_free.median) < 0.02);
  // MaxText's Trillium log is the only source on v6e: left out, v6e borrows the other BF16 fits.
  CHECK(v6e.within == 5);
  CHECK(v6e.median == doctest::Approx(-0.188).epsilon(0.02));
  CHECK(figures("maxtext TPU v6e", false).within == 8);
  const std::string report = holdout_report(check_published_runs(runs()), holdout());
  CHECK(contains(report, "by family (trainer and accelerator): in sample | left out"));
  CHECK(contains(report, "not fitted again: activation_passes"));
  // torchtitan's runs, predicted with its kernel factor fitted to its other source's runs.
  const Figures titan = figures("torchtitan H100", true);
  CHECK(titan.within == 13);
  CHECK(std::abs(titan.median) < 0.06);
  // A family is named by the accelerator before its parenthesis, and the columns stay aligned.
  CHECK(contains(report, "\ntorchtitan H100         22 runs"));
  CHECK(contains(report, "\nall                    203 runs"));
}

TEST_CASE("Muon in the planner: one state buffer per matrix, Newton-Schulz FLOPs, ZeRO and tensor-parallel gathers") {
  // Per iteration on X of [s, l]: X X^T, A A and B X.
  const double a = 2048, b = 7168;
  CHECK(newton_schulz_flops(a, b, 5) == doctest::Approx(5 * (4 * a * a * b + 2 * a * a * a)));
  CHECK(newton_schulz_flops(7168, 2048, 5) == newton_schulz_flops(2048, 7168, 5));
  const mt::Config cfg = mt::load_config("configs/kimi-k2.toml", {});
  const OptimizerPlan muon = optimizer_plan(cfg.optimizer);
  REQUIRE(muon.muon);
  const MuonWork w = muon_work(cfg.model, muon);
  // Every routed expert's three matrices are Muon's; so is nearly every other parameter but the
  // embedding and the head.
  CHECK(w.expert_params == doctest::Approx(mt::routed_expert_params(cfg.model)));
  const double rest = mt::total_params(cfg.model) - w.expert_params;
  CHECK(w.dense_params == doctest::Approx(rest - 2.0 * cfg.model.vocab_size * cfg.model.d_model).epsilon(0.001));
  Cluster c = load_cluster("configs/clusters/h800-deepseek.toml");
  // Kimi K2's published layout (report §2.4.2: PP16 with virtual stages, EP16, ZeRO-1), with full
  // recomputation standing in for its CPU offload of activations.
  Layout l = parse_layout("tp=1,pp=16,ep=16,schedule=interleaved,vpp=2,zero=1,mbs=1,recompute=full", 2048);
  l.ep_receive_bound = 1;
  REQUIRE(layout_problem(cfg.model, cfg.training.global_batch, c, l).empty());
  const Estimate k2 = estimate_step(cfg.model, cfg.training.global_batch, c, l, muon);
  const Estimate adamw = estimate_step(cfg.model, cfg.training.global_batch, c, l);
  MESSAGE("K2 on 2048 H800: " << k2.step_s << " s, " << k2.memory.total() / 1e9 << " GB, optimizer "
                              << k2.memory.optimizer / 1e9 << " GB (AdamW " << adamw.memory.optimizer / 1e9 << ")");
  CHECK(k2.fits);
  CHECK(k2.step_s == doctest::Approx(27.41).epsilon(0.01));
  CHECK(k2.memory.total() / 1e9 == doctest::Approx(41.7).epsilon(0.01));
  // Muon's one buffer against AdamW's two moments: 8 bytes where AdamW keeps 12.
  CHECK(k2.memory.optimizer < adamw.memory.optimizer);
  CHECK(k2.time.optimizer > adamw.time.optimizer);
  // Without ZeRO every data-parallel replica repeats the Newton-Schulz work its owner does once.
  Layout whole = l;
  whole.zero = 0;
  const StepShape s = step_shape(cfg.model, cfg.training.global_batch, l);
  const HeldParams held = held_params(cfg.model, l, s);
  const MuonStepCost owned = muon_step_cost(cfg.model, c, l, s, held, muon);
  const MuonStepCost repeated = muon_step_cost(cfg.model, c, whole, s, held, muon);
  CHECK(repeated.newton_schulz_s > 7 * owned.newton_schulz_s);
  CHECK(owned.gather_s == 0);
  // Under ZeRO the trainer gathers each matrix's FP32 pieces and scatters the owner's result back:
  // an FP32 all-reduce's volume of the rank's Muon matrices; without ZeRO nothing moves.
  CHECK(repeated.zero_s == 0);
  const double experts = mt::routed_expert_params(cfg.model), dense = mt::total_params(cfg.model) - experts;
  const double zero_s = all_reduce_time(c, 4 * held.dense * w.dense_params / dense, held.dense_replicas, l.tp) +
                        all_reduce_time(c, 4 * held.expert * w.expert_params / experts, held.expert_replicas, l.ep);
  CHECK(owned.zero_s == doctest::Approx(zero_s));
  CHECK(owned.zero_s > 0.01 * k2.step_s);
  Layout tp2 = parse_layout("tp=2,pp=16,ep=16,schedule=1f1b,zero=1,mbs=1,recompute=full", 2048);
  const StepShape s2 = step_shape(cfg.model, cfg.training.global_batch, tp2);
  CHECK(muon_step_cost(cfg.model, c, tp2, s2, held_params(cfg.model, tp2, s2), muon).gather_s > 0);
  CHECK(muon_step_cost(cfg.model, c, l, s, held, OptimizerPlan{}).seconds() == 0);
}

TEST_CASE("with ZeRO open to Muon, the search puts Kimi K2's degrees (tp=1, pp=16, ep=16, ZeRO-1) within 3%") {
  const mt::Config cfg = mt::load_config("configs/kimi-k2.toml", {});
  const Cluster c = load_cluster("configs/clusters/h800-deepseek.toml");
  const FixedSettings fixed{cfg.parallel.ep_receive_bound, 0, optimizer_plan(cfg.optimizer)};
  const SearchResult r = search_layouts(cfg.model, cfg.training.global_batch, c, 2048, false, 1, fixed);
  REQUIRE_FALSE(r.ranked.empty());
  const Estimate& best = r.ranked.front();
  MESSAGE("best " << layout_text(best.layout) << ": " << best.step_s << " s");
  // ZeRO's FP32 gather and scatter of Muon's pieces weigh on wide data parallelism: the best
  // shrinks dp with tp=4 and ep=128, and K2's degrees come within 3% of it.
  CHECK(best.layout.zero == 1);
  CHECK(best.layout.dp < 128);
  const auto k2 = std::find_if(r.ranked.begin(), r.ranked.end(), [](const Estimate& e) {
    return e.layout.tp == 1 && e.layout.pp == 16 && e.layout.ep == 16 && e.layout.zero == 1;
  });
  REQUIRE(k2 != r.ranked.end());
  MESSAGE("K2's degrees at rank " << (k2 - r.ranked.begin()) + 1 << ": " << layout_text(k2->layout) << ", "
                                  << k2->step_s << " s");
  CHECK(k2->step_s < 1.03 * best.step_s);
}
