#include "train/muon.hpp"

#include <algorithm>
#include <cmath>

namespace mt {

MuonMatrix muon_matrix(const ParamInfo& p, const OptimizerConfig& cfg) {
  if (cfg.kind != OptimizerKind::muon || p.name == "embedding" || p.name == "head") return {};
  const bool router = p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".router") == 0;
  if (router && cfg.muon.router == RouterOptimizer::adamw) return {};
  const size_t dims = p.shape.size();
  if (dims != 2 && dims != 3) return {};
  // The whole matrix's shape: a tensor-parallel slice is joined before the iteration (experts are
  // split along their first dimension, each expert whole).
  const std::vector<int64_t>& whole = p.global_shape.empty() ? p.shape : p.global_shape;
  MuonMatrix m{.muon = true, .count = dims == 3 ? int(p.shape[0]) : 1, .rows = int(whole[dims - 2]),
               .cols = int(whole[dims - 1])};
  const double a = m.rows, b = m.cols;
  m.scale = cfg.muon.scale == MuonScale::original ? std::sqrt(std::max(1.0, a / b)) : 0.2 * std::sqrt(std::max(a, b));
  return m;
}

MuonStepValues muon_step_values(const OptimizerConfig& cfg, double lr) {
  const double muon_lr = cfg.muon.lr * (lr / cfg.lr);
  return {.lr = muon_lr, .decay = muon_lr * cfg.muon.weight_decay};
}

}  // namespace mt
