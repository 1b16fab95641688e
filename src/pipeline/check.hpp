#pragma once
// Validates a schedule before anything runs it: every task sits on a chunk its rank holds; each
// micro-batch gets exactly one forward and one complete backward (B, or I then W) per stage;
// every task's inputs exist on its rank before it runs (produced there or received); every send
// has exactly one posted receive and one wait on the right rank, and the reverse; and the ranks'
// programs cannot deadlock when sends block until the receive is posted and waits block until
// the data was sent.
#include <string>
#include <vector>

#include "pipeline/schedule.hpp"

namespace mt::pipeline {

// The problems found, each naming the rank, the step and the operation; empty when valid.
std::vector<std::string> check_schedule(const Schedule& s);

}  // namespace mt::pipeline
