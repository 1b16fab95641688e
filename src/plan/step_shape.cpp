#include "plan/step_shape.hpp"

#include "model/flops.hpp"
#include "pipeline/generators.hpp"

namespace mt::plan {

using pipeline::Kind;

StepShape step_shape(const ModelConfig& m, int global_batch, const Layout& l) {
  const pipeline::Placement placement = placement_of(l);
  StepShape s;
  s.pieces = placement.stages;
  s.held = placement.chunks_per_rank;
  s.microbatches = global_batch / (l.dp * l.micro_batch);
  s.tokens = double(l.micro_batch) * m.seq_len / l.cp;
  s.layers_per_piece = double(m.n_layers + m.mtp.depth) / s.pieces;
  s.moe_per_piece = double(moe_layer_count(m)) / s.pieces;
  s.paired = l.scheduled() && (l.schedule == Kind::dualpipe || l.schedule == Kind::dualpipev);
  return s;
}

}  // namespace mt::plan
