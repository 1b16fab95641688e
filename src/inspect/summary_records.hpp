#pragma once
// Run and checkpoint summaries as records for `inspect --json` / `--csv`. The field names are
// part of the interface: scripts read them.
#include "inspect/checkpoint_summary.hpp"
#include "inspect/records.hpp"
#include "inspect/run_summary.hpp"

namespace mt {

Record run_record(const RunSummary& s);
Record checkpoint_record(const CheckpointSummary& s);

}  // namespace mt
