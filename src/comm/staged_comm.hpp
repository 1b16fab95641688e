#pragma once
// StagedComm: communication of device memory through a host Comm. Payloads go device -> host
// buffer (the backend's download) -> the host Comm -> host buffer -> device (upload), so the host
// never touches device memory but through the backend; this is the path for ranks that share one
// GPU, and under the strict CPU backend the proof that no layout reads device memory from the
// host. On a backend whose memory the host may address (plain CPU) the device pointers go to the
// host Comm as they are: no copies, the speed of MpiComm.
#include <memory>

#include "comm/device_comm.hpp"
#include "ops/ops.hpp"

namespace mt {

// `host` must outlive the result, and so must the backend's state.
std::unique_ptr<DeviceComm> make_staged_comm(Comm& host, const Backend& backend);

}  // namespace mt
