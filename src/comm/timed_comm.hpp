#pragma once
// A Comm that adds the wall time of every call it forwards to a counter: the host channel of a
// timed DeviceComm (timed_device_comm.hpp), so per-expert counts count as expert-parallel time.
#include <memory>

#include "comm/comm.hpp"

namespace mt {

// `inner` and `seconds` must outlive the returned Comm.
std::unique_ptr<Comm> make_timed_comm(Comm& inner, double* seconds);

}  // namespace mt
