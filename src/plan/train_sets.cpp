#include "plan/train_sets.hpp"

namespace mt::plan {

using pipeline::Kind;

std::vector<std::string> train_sets(const Layout& l) {
  auto set = [](const std::string& key, const std::string& value) { return key + "=" + value; };
  auto n = [](int v) { return std::to_string(v); };
  // Without a schedule the micro-batches run one after another, which train calls 1f1b.
  const std::string schedule = l.scheduled() ? pipeline::kind_name(l.schedule) : "1f1b";
  std::vector<std::string> sets{set("parallel.dp", n(l.dp)), set("parallel.tp", n(l.tp)), set("parallel.pp", n(l.pp)),
                                set("parallel.ep", n(l.ep)), set("parallel.schedule", schedule)};
  sets.push_back(set("parallel.vpp", n(l.scheduled() && l.schedule == Kind::interleaved ? l.vpp : 1)));
  sets.push_back(set("parallel.zero", n(l.zero)));
  sets.push_back(set("training.micro_batch", n(l.micro_batch)));
  sets.push_back(set("training.recompute", name_of(l.recompute)));
  // The planner times BF16 GEMMs unless the layout is FP8.
  sets.push_back(set("precision.matmul", l.fp8 ? "fp8" : "bf16"));
  return sets;
}

std::string train_set_line(const Layout& l) {
  std::string out;
  for (const std::string& s : train_sets(l)) out += (out.empty() ? "--set " : " --set ") + s;
  return out;
}

Layout layout_of_config(const Config& c) {
  const ParallelConfig& p = c.parallel;
  Layout l;
  l.dp = p.dp;
  l.tp = p.tp;
  l.pp = p.pp;
  l.ep = p.ep;
  l.vpp = p.vpp;
  l.zero = p.zero;
  l.schedule = p.schedule;
  l.micro_batch = c.training.micro_batch;
  l.recompute = c.training.recompute;
  l.fp8 = c.precision.matmul == MatmulPrecision::fp8;
  l.storage = Storage::fp32;  // what moetrain stores, whatever the GEMMs' inputs
  return l;
}

}  // namespace mt::plan
