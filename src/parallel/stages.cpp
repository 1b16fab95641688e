#include "parallel/stages.hpp"

namespace mt {

std::vector<StageSpec> stages_of(const ModelConfig& m, const pipeline::Placement& pl, int pp_rank) {
  const int per_stage = m.n_layers / pl.stages;
  std::vector<StageSpec> out;
  for (int c = 0; c < pl.chunks_per_rank; ++c) {
    const int position = pl.locate(pp_rank, c)->position;
    out.push_back({position * per_stage, (position + 1) * per_stage, position == 0, position == pl.stages - 1});
  }
  return out;
}

}  // namespace mt
