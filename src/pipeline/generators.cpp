// Request validation, placement and dispatch to the per-kind generators.
#include "pipeline/generators.hpp"

#include "pipeline/transfers.hpp"
#include "util/error.hpp"

namespace mt::pipeline {

namespace {

[[noreturn]] void reject(const ScheduleRequest& req, const std::string& what) {
  throw UserError("schedule " + kind_name(req.kind) + " with pp=" + std::to_string(req.pp) +
                  ", micro-batches=" + std::to_string(req.microbatches) +
                  (req.kind == Kind::interleaved ? ", vpp=" + std::to_string(req.vpp) : "") + ": " + what);
}

long long round_up(long long x, long long multiple) { return (x + multiple - 1) / multiple * multiple; }

}  // namespace

void validate_request(const ScheduleRequest& req) {
  if (req.pp < 1) reject(req, "pp must be at least 1");
  if (req.microbatches < 1) reject(req, "micro-batches must be at least 1");
  if (req.kind == Kind::interleaved) {
    if (req.vpp < 2) reject(req, "interleaved needs vpp >= 2 chunks per rank (vpp=1 is 1f1b)");
    if (req.pp < 2) reject(req, "interleaved needs pp >= 2");
    if (req.microbatches % req.pp != 0)
      reject(req, "interleaved needs micro-batches to be a multiple of pp: use " +
                      std::to_string(round_up(req.microbatches, req.pp)));
  } else if (req.vpp != 1) {
    reject(req, "vpp applies only to the interleaved schedule; leave it at 1 (dualpipe and dualpipev "
                "always hold two chunks per rank)");
  }
  const long long least = 2LL * req.pp;  // pp may be as large as INT_MAX here
  if (req.kind == Kind::dualpipe) {
    if (req.pp % 2 != 0)
      reject(req, "dualpipe needs an even pp (rank r pairs with rank pp-1-r): use pp=" + std::to_string(req.pp + 1) +
                      " or dualpipev, which takes any pp");
    if (req.microbatches % 2 != 0 || req.microbatches < least)
      reject(req, "dualpipe needs an even number of micro-batches, at least 2*pp = " + std::to_string(least) +
                      " (half enter at each end): use " +
                      std::to_string(std::max(least, round_up(req.microbatches, 2))));
  }
  if (req.kind == Kind::dualpipev && req.microbatches < least)
    reject(req, "dualpipev needs at least 2*pp = " + std::to_string(least) + " micro-batches");
}

bool validate_request_ok(const ScheduleRequest& req) {
  try {
    validate_request(req);
  } catch (const UserError&) {
    return false;
  }
  return true;
}

Placement placement_for(const ScheduleRequest& req) {
  Placement p{req.kind, req.pp, 1, 1, req.pp, req.microbatches};
  switch (req.kind) {
    case Kind::interleaved:
      p.chunks_per_rank = req.vpp;
      p.stages = req.pp * req.vpp;
      break;
    case Kind::dualpipe:
      p.chunks_per_rank = 2;
      p.flows = 2;
      p.microbatches_per_flow = req.microbatches / 2;
      break;
    case Kind::dualpipev:
      p.chunks_per_rank = 2;
      p.stages = 2 * req.pp;
      break;
    default: break;
  }
  return p;
}

std::vector<std::vector<ComputeOp>> compute_order_for(const ScheduleRequest& req) {
  switch (req.kind) {
    case Kind::gpipe: return gpipe_order(req.pp, req.microbatches);
    case Kind::one_f_one_b: return one_f_one_b_order(req.pp, req.microbatches);
    case Kind::interleaved: return interleaved_order(req.pp, req.microbatches, req.vpp);
    case Kind::zb_h1: return zb_h1_order(req.pp, req.microbatches);
    case Kind::dualpipe: return dualpipe_order(req.pp, req.microbatches);
    case Kind::dualpipev: return dualpipev_order(req.pp, req.microbatches);
  }
  return {};
}

Schedule make_schedule(const ScheduleRequest& req) {
  validate_request(req);
  std::vector<std::vector<ComputeOp>> order = compute_order_for(req);
  Placement placement = placement_for(req);
  return Schedule{req.kind, req.pp, req.vpp, req.microbatches, placement, attach_transfers(placement, order)};
}

}  // namespace mt::pipeline
