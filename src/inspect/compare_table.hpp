#pragma once
// `inspect` of several runs: one aligned table, a row per run, with a column for every config key
// whose value differs between the runs.
#include <string>
#include <vector>

#include "inspect/run_summary.hpp"

namespace mt {

std::string comparison_table(const std::vector<RunSummary>& runs);

}  // namespace mt
