#pragma once
// A DeviceComm that adds the wall time of every call it forwards to a counter, host() calls
// included (per-expert counts): the tensor- and expert-parallel times of /timing/rank_phases.
#include <memory>

#include "comm/device_comm.hpp"

namespace mt {

// `seconds` must outlive the returned DeviceComm.
std::unique_ptr<DeviceComm> make_timed_device_comm(std::unique_ptr<DeviceComm> inner, double* seconds);

}  // namespace mt
