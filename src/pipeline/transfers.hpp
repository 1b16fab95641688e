#pragma once
// Turns each rank's compute order into a program with its point-to-point operations.
#include "pipeline/simulate.hpp"

namespace mt::pipeline {

// Each transfer between ranks becomes a send right after the operation producing it, a wait
// right before the operation consuming it, and a posted receive placed as late as possible
// while still ahead of the send in the schedule's own timeline (default costs). The timeline
// is then a valid run in which no send ever blocks; since blocking only delays a rank and never
// changes what it does next, no timing can deadlock (check_schedule confirms it). Transfers
// between two chunks of one rank stay local.
std::vector<std::vector<Step>> attach_transfers(const Placement& placement, const RankOrders& order);

}  // namespace mt::pipeline
