#include "parallel/layout.hpp"

#include <cstdio>

namespace mt {

ParallelLayout layout_of(const ParallelConfig& p, const ModelConfig& m) {
  ParallelLayout l{.dp = p.dp, .tp = p.tp, .pp = p.pp, .ep = p.ep};
  const bool dual = p.schedule == pipeline::Kind::dualpipe, v_shape = p.schedule == pipeline::Kind::dualpipev;
  l.mirrored = p.pp > 1 && dual;
  // DualPipeV's first and last stages share rank 0; DualPipe's pairs hold both ends.
  l.tied_embedding = p.pp > 1 && m.mtp.depth > 0 && !dual && !v_shape;
  return l;
}

std::string layout_text(const ParallelConfig& p) {
  return "dp=" + std::to_string(p.dp) + " tp=" + std::to_string(p.tp) + " pp=" + std::to_string(p.pp) +
         " ep=" + std::to_string(p.ep) + " vpp=" + std::to_string(p.vpp) + " schedule=" + name_of(p.schedule) +
         " zero=" + std::to_string(p.zero);
}

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
  // A big job lists its first ranks; the formula gives the rest.
  const int shown = l.world() <= 64 ? l.world() : 16;
  for (int r = 0; r < shown; ++r) {
    const RankCoords c = coords_of(l, r);
    char line[160];
    std::snprintf(line, sizeof line, "  rank %3d: tp %d dp %d pp %d ep %d (experts %d-%d)\n", r, c.tp, c.dp, c.pp, c.ep,
                  c.ep * per, (c.ep + 1) * per - 1);
    out += line;
  }
  if (shown < l.world())
    out += "  ... " + std::to_string(l.world() - shown) + " more: rank = tp + tp_size * (dp + dp_size * pp)\n";
  return out;
}

}  // namespace mt
