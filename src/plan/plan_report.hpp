#pragma once
// What `moetrain plan` prints: a table of layouts with their time breakdown, JSON for scripts,
// and the comparison of the best layout with the best one without pipeline parallelism.
#include <string>
#include <vector>

#include "plan/cost_model.hpp"

namespace mt::plan {

std::string estimates_table(const std::vector<Estimate>& rows);
std::string estimates_json(const std::string& model, const Cluster& c, int gpus, const std::vector<Estimate>& rows);
// Why `best` beats `best_without_pp`, part by part; either may be absent (null).
std::string explain(const Estimate* best, const Estimate* best_without_pp);

}  // namespace mt::plan
