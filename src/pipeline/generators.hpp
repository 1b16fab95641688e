#pragma once
// Schedule generators: from (kind, pp, micro-batches, vpp) to each rank's compute order.
#include <vector>

#include "pipeline/schedule.hpp"

namespace mt::pipeline {

struct ScheduleRequest {
  Kind kind;
  int pp;
  int microbatches;  // in total (DualPipe splits them over its two directions)
  int vpp = 1;       // chunks per rank, interleaved only
};

// Throws UserError when the request breaks the kind's constraints, saying what would fit.
void validate_request(const ScheduleRequest& req);
// The same check without the message, for searches.
bool validate_request_ok(const ScheduleRequest& req);
Placement placement_for(const ScheduleRequest& req);
// The compute order alone (validated request), for timing without communication steps.
std::vector<std::vector<ComputeOp>> compute_order_for(const ScheduleRequest& req);
// Validates, generates the compute order and attaches the exchanges.
Schedule make_schedule(const ScheduleRequest& req);

// The compute orders, one function per family (validated requests only).
std::vector<std::vector<ComputeOp>> gpipe_order(int pp, int microbatches);
std::vector<std::vector<ComputeOp>> one_f_one_b_order(int pp, int microbatches);
std::vector<std::vector<ComputeOp>> interleaved_order(int pp, int microbatches, int vpp);
std::vector<std::vector<ComputeOp>> zb_h1_order(int pp, int microbatches);
std::vector<std::vector<ComputeOp>> dualpipe_order(int pp, int microbatches);
std::vector<std::vector<ComputeOp>> dualpipev_order(int pp, int microbatches);

}  // namespace mt::pipeline
