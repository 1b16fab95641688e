#pragma once
// A Comm that adds the wall time of every call it forwards to a counter: how the trainer
// measures the time each kind of communication (tensor-parallel sums, expert all-to-alls) takes.
#include <memory>

#include "comm/comm.hpp"

namespace mt {

// `seconds` must outlive the returned Comm.
std::unique_ptr<Comm> make_timed_comm(std::unique_ptr<Comm> inner, double* seconds);

}  // namespace mt
