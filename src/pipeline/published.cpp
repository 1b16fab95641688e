#include "pipeline/published.hpp"

namespace mt::pipeline {

PublishedBubble published_bubble(Kind kind, int pp, const Costs& c) {
  const double F = c.forward, B = c.backward, W = c.weight_grad, FB = c.overlapped;
  switch (kind) {
    case Kind::gpipe:
    case Kind::one_f_one_b: return {"(PP-1)(F+B)", (pp - 1) * (F + B)};
    // Per-chunk costs: (PP-1)(F+B) with chunk costs is the (p-1)/(v*m) fraction of the ideal time.
    case Kind::interleaved: return {"(PP-1)(F+B) with per-chunk F and B = (p-1)/(v*m) of ideal", (pp - 1) * (F + B)};
    case Kind::zb_h1: return {"(PP-1)(F+B-2W)", (pp - 1) * (F + B - 2 * W)};
    case Kind::dualpipe: return {"(PP/2-1)(F&B+B-3W)", (pp / 2 - 1) * (FB + B - 3 * W)};
    // DualPipeV's table row counts PP stages, which sit on PP/2 ranks: PP = 2*pp here.
    case Kind::dualpipev: return {"(PP/2-1)(F&B+B-3W), PP = 2 x ranks", (pp - 1) * (FB + B - 3 * W)};
  }
  return {"", 0};
}

}  // namespace mt::pipeline
