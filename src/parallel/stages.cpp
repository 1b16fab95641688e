#include "parallel/stages.hpp"

#include "model/flops.hpp"

namespace mt {

std::vector<StageSpec> stages_of(const ModelConfig& m, const pipeline::Placement& pl, int pp_rank) {
  const std::vector<int> cut = pipeline_cut(m, pl.stages);
  std::vector<StageSpec> out;
  for (int c = 0; c < pl.chunks_per_rank; ++c) {
    const int position = pl.locate(pp_rank, c)->position;
    out.push_back({cut[size_t(position)], cut[size_t(position) + 1], position == 0, position == pl.stages - 1});
  }
  return out;
}

}  // namespace mt
