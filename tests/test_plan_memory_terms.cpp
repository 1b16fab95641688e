// Three terms of the planner's memory that follow the trainer: the output heads' logits under
// model.head_chunk_tokens, the room for expert-parallel arrivals under parallel.ep_receive_bound, and
// the FP8 codes fp8.fused_codes keeps beside the values GEMMs read.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "plan/cluster.hpp"
#include "plan/cost_model.hpp"
#include "plan/plan_report.hpp"
#include "plan/published.hpp"
#include "test_helpers.hpp"
#include "train/accumulate.hpp"
#include "util/format.hpp"

namespace {

using mt::plan::Estimate;
using mt::plan::Layout;
using mt::plan::Storage;

const mt::plan::Cluster& h800() {
  static const mt::plan::Cluster c = mt::plan::load_cluster("configs/clusters/h800-deepseek.toml");
  return c;
}

Estimate planned(const mt::Config& cfg, const std::string& layout, Storage storage) {
  Layout l = mt::parse_layout(layout, h800().accelerators);
  l.storage = storage;
  l.ep_receive_bound = cfg.parallel.ep_receive_bound;
  l.fp8_code_bytes = l.fp8 ? mt::fp8_code_bytes(cfg.fp8) : 0;
  const std::string why = mt::plan::layout_problem(cfg.model, cfg.training.global_batch, h800(), l);
  CAPTURE(why);
  REQUIRE(why.empty());
  return mt::plan::estimate_step(cfg.model, cfg.training.global_batch, h800(), l);
}

mt::Config with_chunk(const char* path, const std::string& layout_sets, int chunk) {
  std::vector<std::string> sets = {"model.head_chunk_tokens=" + std::to_string(chunk)};
  if (!layout_sets.empty()) sets.push_back(layout_sets);
  return mt::load_config(path, sets);
}

struct Case {
  const char* experiment;
  const char* layout;
  const char* sets;
};
// GPT-2-124M whole and split by tensor parallelism, DeepSeek-V3 (a bound of 2 keeps its arrivals'
// room small) and the small MoE with MTP. Without a pipeline: the recipe counts the logits on
// every rank, moetrain's storage on the last stage's, which need not be the busiest.
const Case kCases[] = {
    {"bench/gpt2-124m.toml", "dp=2,tp=1,pp=1,ep=1,zero=1,mbs=16,recompute=none", ""},
    {"bench/gpt2-124m.toml", "dp=2,tp=2,pp=1,ep=1,zero=1,mbs=16,recompute=selective,sp=on", ""},
    {"configs/deepseek-v3.toml", "dp=1024,tp=2,pp=1,ep=64,zero=1,mbs=1,recompute=full,fp8=on,sp=on",
     "parallel.ep_receive_bound=2"},
    {"configs/deepseek-v3-small.toml", "dp=2,tp=1,pp=1,ep=1,zero=1,mbs=2,recompute=none", ""},
};

}  // namespace

TEST_CASE("the plan's logits follow model.head_chunk_tokens: whole per head, or one chunk of every head") {
  for (const Case& c : kCases)
    for (int chunk : {0, 512, 4096, 1 << 20}) {
      CAPTURE(c.experiment);
      CAPTURE(c.layout);
      CAPTURE(chunk);
      const mt::Config whole = with_chunk(c.experiment, c.sets, 0), cut = with_chunk(c.experiment, c.sets, chunk);
      const Layout l = mt::parse_layout(c.layout, h800().accelerators);
      const double tokens = double(l.micro_batch) * whole.model.seq_len, V = whole.model.vocab_size;
      const double heads = 1 + whole.model.mtp.depth;
      const double rows = chunk > 0 ? std::min(double(chunk), tokens) : heads * tokens;
      const double logits_drop = 4 * V * (heads * tokens - rows);
      // The BF16 recipe: FP32 logits split by vocabulary over tp, whole per head or one chunk.
      const double recipe_drop = planned(whole, c.layout, Storage::bf16_recipe).memory.total() -
                                 planned(cut, c.layout, Storage::bf16_recipe).memory.total();
      CHECK(recipe_drop == doctest::Approx(logits_drop / l.tp).epsilon(1e-9));
      // moetrain's storage (the head whole on every tensor-parallel rank) drops the same logits, and
      // up to one chunk's more: the chunk's buffer shares the scratch arena with the blocks' temporaries.
      const double storage_drop = planned(whole, c.layout, Storage::fp32).memory.activations -
                                  planned(cut, c.layout, Storage::fp32).memory.activations;
      const double chunk_logits = chunk > 0 ? 4 * V * rows : 0;
      CHECK(storage_drop >= logits_drop - 1e-3);
      CHECK(storage_drop <= logits_drop + chunk_logits + 1e-3);
    }
}

TEST_CASE("the plan of GPT-2-124M and DeepSeek-V3 falls by the logits with chunks of 4096 tokens") {
  const mt::Config gpt2 = with_chunk("bench/gpt2-124m.toml", "", 0);
  const mt::Config gpt2_cut = with_chunk("bench/gpt2-124m.toml", "", 4096);
  const char* gpt2_layout = "dp=2,tp=1,pp=1,ep=1,zero=1,mbs=16,recompute=none";
  // 16 x 1024 tokens of 50257 FP32 logits: 3.29 GB whole, 0.82 GB a chunk.
  CHECK(planned(gpt2, gpt2_layout, Storage::bf16_recipe).memory.total() -
            planned(gpt2_cut, gpt2_layout, Storage::bf16_recipe).memory.total() ==
        doctest::Approx(4.0 * 50257 * (16384 - 4096)));
  const char* ds = "configs/deepseek-v3.toml";
  const char* ds_layout = "dp=128,tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on";
  const mt::Config v3 = with_chunk(ds, "parallel.ep_receive_bound=2", 0);
  const mt::Config v3_cut = with_chunk(ds, "parallel.ep_receive_bound=2", 4096);
  // 4096 tokens, the main head and one MTP head of 129,280 logits each, then one chunk.
  CHECK(planned(v3, ds_layout, Storage::bf16_recipe).memory.total() -
            planned(v3_cut, ds_layout, Storage::bf16_recipe).memory.total() ==
        doctest::Approx(4.0 * 129280 * 4096));
}

TEST_CASE("the plan's recipe counts the room for expert-parallel arrivals that parallel.ep_receive_bound reserves") {
  const char* ds = "configs/deepseek-v3.toml";
  auto at = [&](int ep, const std::string& bound) {
    const mt::Config cfg = mt::load_config(ds, {"parallel.ep_receive_bound=" + bound});
    return planned(cfg, "dp=128,tp=1,pp=16,ep=" + std::to_string(ep) +
                            ",schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on",
                   Storage::bf16_recipe);
  };
  double last = 0;
  // Up to 32 the worst case grows with ep (ep x top_k rows per token); at 64, 4 experts per rank, it stays.
  for (int ep : {2, 4, 8, 16, 32}) {
    CAPTURE(ep);
    const Estimate worst = at(ep, "\"worst\""), half_more = at(ep, "1.5"), average = at(ep, "1");
    // "worst" reserves ep x min(top_k, experts per rank) rows per token, more with every ep (2 x the
    // average at ep = 2); a bound of 1.5 half the average over it; 1 the average itself.
    CHECK(worst.memory.ep_headroom > last);
    CHECK(worst.memory.ep_headroom > half_more.memory.ep_headroom);
    CHECK(half_more.memory.ep_headroom > 0);
    CHECK(average.memory.ep_headroom == 0);
    // The room is in the activations, nothing else.
    CHECK(worst.memory.activations - average.memory.activations ==
          doctest::Approx(worst.memory.ep_headroom).epsilon(1e-9));
    CHECK(worst.memory.weights == average.memory.weights);
    last = worst.memory.ep_headroom;
  }
  // Without expert parallelism nothing arrives.
  CHECK(at(1, "\"worst\"").memory.ep_headroom == 0);
}

TEST_CASE("plan --json reports parallel.ep_receive_bound and the arrivals' room over the average") {
  const char* layout = "dp=128,tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=none,fp8=on";
  const Estimate worst =
      planned(mt::load_config("configs/deepseek-v3.toml", {"parallel.ep_receive_bound=\"worst\""}), layout,
              Storage::bf16_recipe);
  const Estimate twice = planned(mt::load_config("configs/deepseek-v3.toml", {"parallel.ep_receive_bound=2"}), layout,
                                 Storage::bf16_recipe);
  const std::string json = mt::plan::estimates_json("deepseek-v3", h800(), 2048, {worst, twice});
  CHECK(json.find("\"ep_receive_bound\":\"worst\"") != std::string::npos);
  CHECK(json.find("\"ep_receive_bound\":2,") != std::string::npos);
  CHECK(json.find("\"ep_arrival_room_over_average_bytes\":" + mt::format_number("%.6g", worst.memory.ep_headroom)) !=
        std::string::npos);
  CHECK(json.find("\"activation_bytes\":" + mt::format_number("%.6g", twice.memory.activations)) != std::string::npos);
  const std::string table = mt::plan::estimates_table({worst, twice});
  CHECK(table.find("parallel.ep_receive_bound = worst reserves") != std::string::npos);
  CHECK(table.find("parallel.ep_receive_bound = 2 reserves") != std::string::npos);
}

TEST_CASE("plan-check's published MoE runs keep room for the average arrivals: DeepSeek-V3's layouts fit") {
  const std::vector<mt::plan::PublishedRun> runs = mt::plan::load_published_runs("configs/published/runs.toml");
  const std::vector<mt::plan::CheckedRun> checked = mt::plan::check_published_runs(runs);
  int deepseek = 0;
  for (const mt::plan::CheckedRun& c : checked) {
    if (c.run->name.rfind("DeepSeek-V3, 2048 H800", 0) != 0 && c.run->name.rfind("DeepSeek-V3, 256 GB200", 0) != 0)
      continue;
    CAPTURE(c.run->name);
    ++deepseek;
    CHECK(c.estimate.layout.ep_receive_bound == 1);
    CHECK(c.estimate.memory.ep_headroom == 0);
    CHECK(c.estimate.fits);
  }
  CHECK(deepseek >= 2);
}
