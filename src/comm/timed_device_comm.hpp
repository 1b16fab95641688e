#pragma once
// A DeviceComm that times every call it forwards: the tensor- and expert-parallel times of
// /timing/rank_phases. Payload calls and waits are intervals of `device_time`, measured by the
// device (on a GPU: how long the stream spent in the NCCL kernels, not how long the host took to
// queue them); host() calls (per-expert counts) block the host, and their wall time is added to
// `host_seconds`.
#include <memory>

#include "comm/device_comm.hpp"
#include "ops/backend/device_timer.hpp"

namespace mt {

// `host_seconds` and `device_time` must outlive the returned DeviceComm.
std::unique_ptr<DeviceComm> make_timed_device_comm(std::unique_ptr<DeviceComm> inner, double* host_seconds,
                                                   DeviceTimer* device_time);
// The same over a communicator the caller keeps (and uses untimed elsewhere); `inner` must outlive it.
std::unique_ptr<DeviceComm> make_timed_device_comm(DeviceComm& inner, double* host_seconds, DeviceTimer* device_time);

}  // namespace mt
