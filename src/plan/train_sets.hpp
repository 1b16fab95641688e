#pragma once
// The planner's layouts in train's vocabulary, both ways: the --set line that makes `moetrain
// train` run a layout the planner proposes, and the layout a training config describes (for
// `train --dry-run --cluster`). A layout that goes through both comes back the same.
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plan/cost_model.hpp"

namespace mt::plan {

// "parallel.dp=512", "parallel.schedule=dualpipev", ..., "precision.matmul=fp8": every key of the
// layout, so nothing is left to the experiment file's own [parallel] table.
std::vector<std::string> train_sets(const Layout& l);
// "--set parallel.dp=512 --set ..." (no value needs shell quoting).
std::string train_set_line(const Layout& l);
// The layout of a training config: its [parallel] table, micro-batch, recomputation and FP8, with
// moetrain's own storage (FP32).
Layout layout_of_config(const Config& c);

}  // namespace mt::plan
