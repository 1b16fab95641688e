#pragma once
// What `moetrain plan` prints: a table of layouts with their time breakdown, JSON for scripts,
// and the comparison of the best layout with the best one without pipeline parallelism.
#include <string>
#include <vector>

#include "plan/cost_model.hpp"

namespace mt::plan {

std::string estimates_table(const std::vector<Estimate>& rows);
std::string estimates_json(const std::string& model, const Cluster& c, int gpus, const std::vector<Estimate>& rows);
// One line per row: the `moetrain train` --set arguments that run its layout.
std::string train_lines(const std::vector<Estimate>& rows);
// `train --dry-run --cluster`: the planner's step time and memory per rank for one layout.
std::string prediction_text(const Estimate& e, const Cluster& c);
// Why `best` beats `best_without_pp`, part by part; either may be absent (null).
std::string explain(const Estimate* best, const Estimate* best_without_pp);

}  // namespace mt::plan
