#pragma once
// Layout search: every layout of the cluster's accelerators that the model allows, kept if it
// fits in memory, ranked by predicted step time.
#include <vector>

#include "plan/cost_model.hpp"

namespace mt::plan {

struct SearchResult {
  std::vector<Estimate> ranked;  // fitting layouts, fastest first
  int considered = 0;            // valid layouts estimated
  int too_big = 0;               // of those, how many did not fit in memory
};

// What the experiment sets and every searched layout takes as it is (Layout's fields of these names).
struct FixedSettings {
  double ep_receive_bound = 0;  // parallel.ep_receive_bound (0: the worst case)
  double fp8_code_bytes = 0;    // fp8.fused_codes (fp8_code_bytes of parallel/layout.hpp)
  OptimizerPlan optimizer;      // what each layout's optimizer state and step cost
  // l with the experiment's settings (the FP8 codes' bytes only where l runs FP8).
  void apply_to(Layout& l) const {
    l.ep_receive_bound = ep_receive_bound;
    l.fp8_code_bytes = l.fp8 ? fp8_code_bytes : 0;
  }
};

// Why a search found no layout to print: every candidate was refused (the reason the plainest
// one, all data-parallel, gives), or none fit in memory.
std::string no_layout_reason(const ModelConfig& m, int global_batch, const Cluster& c, int gpus, bool fp8,
                             const SearchResult& r);

// fp8: search FP8 layouts only (true) or BF16 only (false): precision is the experiment's choice.
// max_cp: the most context-parallel ranks a layout may use (powers of two; 1, the default, keeps
// to layouts `moetrain train` runs).
SearchResult search_layouts(const ModelConfig& m, int global_batch, const Cluster& c, int gpus, bool fp8,
                            int max_cp = 1, const FixedSettings& fixed = {});

}  // namespace mt::plan
