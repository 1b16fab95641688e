#include "parallel/layout.hpp"

#include <cstdio>

namespace mt {

RankCoords coords_of(const ParallelLayout& l, int rank) {
  RankCoords c;
  c.rank = rank;
  c.tp = rank % l.tp;
  c.dp = rank / l.tp % l.dp;
  c.pp = rank / l.stage_ranks();
  const int s = c.tp + l.tp * c.dp;
  c.ep = s % l.ep;
  c.ep_group = s / l.ep;
  return c;
}

std::string placement_text(const ParallelLayout& l, int n_experts) {
  std::string out;
  const int per = n_experts / l.ep;
  for (int r = 0; r < l.world(); ++r) {
    const RankCoords c = coords_of(l, r);
    char line[160];
    std::snprintf(line, sizeof line, "  rank %3d: tp %d dp %d pp %d ep %d (experts %d-%d)\n", r, c.tp, c.dp, c.pp, c.ep,
                  c.ep * per, (c.ep + 1) * per - 1);
    out += line;
  }
  return out;
}

}  // namespace mt
