#include "plan/search.hpp"

#include <algorithm>

namespace mt::plan {

namespace {

std::vector<int> powers_of_two_up_to(int limit) {
  std::vector<int> v;
  for (int x = 1; x <= limit; x *= 2) v.push_back(x);
  return v;
}

}  // namespace

SearchResult search_layouts(const ModelConfig& m, int global_batch, const Cluster& c, int gpus, bool fp8, int max_cp,
                            const FixedSettings& fixed) {
  using pipeline::Kind;
  SearchResult out;
  ScheduleTimings timings;
  const bool moe = m.moe.n_routed_experts > 0 && m.n_layers > m.n_dense_layers;
  const std::vector<int> zeros = {1, 2, 3};
  for (int tp : powers_of_two_up_to(std::min(c.domain, 8)))
    for (int cp : powers_of_two_up_to(max_cp))
      for (int pp : powers_of_two_up_to(64)) {
        if (gpus % (tp * cp * pp) != 0) continue;
        const int dp = gpus / (tp * cp * pp);
        std::vector<std::pair<Kind, int>> schedules = {{Kind::one_f_one_b, 1}, {Kind::dualpipev, 1}};
        if (pp > 1)
          schedules = {{Kind::one_f_one_b, 1}, {Kind::interleaved, 2}, {Kind::zb_h1, 1}, {Kind::dualpipe, 1},
                       {Kind::dualpipev, 1}};
        for (int ep : moe ? powers_of_two_up_to(std::min(dp * tp * cp, m.moe.n_routed_experts)) : std::vector<int>{1})
          for (auto [kind, vpp] : schedules)
            for (int zero : zeros)
              for (int mbs : {1, 2, 4})
                for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
                  // The cost model splits activations by sequence parallelism under tp.
                  Layout l{dp, tp, pp, ep, vpp, zero, kind, mbs, recompute, fp8, tp > 1};
                  l.cp = cp;
                  fixed.apply_to(l);
                  if (!layout_problem(m, global_batch, c, l).empty()) continue;
                  Estimate e = estimate_step(m, global_batch, c, l, timings, true, fixed.optimizer);
                  ++out.considered;
                  if (!e.fits) {
                    ++out.too_big;
                    continue;
                  }
                  out.ranked.push_back(e);
                }
      }
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [](const Estimate& a, const Estimate& b) { return a.step_s < b.step_s; });
  return out;
}

std::string no_layout_reason(const ModelConfig& m, int global_batch, const Cluster& c, int gpus, bool fp8,
                             const SearchResult& r) {
  const std::string none = "no layout of " + std::to_string(gpus) + " accelerators of " + c.name +
                           " can run this experiment: ";
  if (r.considered > 0)
    return none + "all " + std::to_string(r.considered) +
           " that divide the work need more memory than an accelerator has; use more --gpus, --fp8, or a smaller model";
  Layout plain;
  plain.dp = gpus;
  plain.fp8 = fp8;
  const std::string why = layout_problem(m, global_batch, c, plain);
  return none + (why.empty() ? std::string() : "all data-parallel (dp = " + std::to_string(gpus) + "), " + why + "; ") +
         "use fewer --gpus or a larger training.global_batch";
}

}  // namespace mt::plan
