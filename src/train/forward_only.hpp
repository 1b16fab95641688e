#pragma once
// Forward passes only, through every pipeline stage in order (evaluation).
#include <functional>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "parallel/groups.hpp"
#include "pipeline/schedule.hpp"
#include "train/transfer_buffers.hpp"

namespace mt {

// fill(first, count, ...) gives sequences first..first+count-1.
using FillSequences = std::function<void(int first, int count, std::vector<int>& inputs, std::vector<int>& targets)>;
// Returns the summed cross-entropy and token count of `sequences` sequences, run in micro-batches
// of `micro_batch` (the last holding the remainder), on every rank.
std::pair<double, long> pipeline_forward_only(Model& model, const pipeline::Placement& placement,
                                              const ParallelGroups& groups, int sequences, int micro_batch,
                                              const FillSequences& fill, TransferBuffers& buffers);

}  // namespace mt
