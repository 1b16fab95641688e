#pragma once
// How a run's device payloads travel between ranks (parallel.comm): over NCCL between GPUs of their
// own, or staged through host memory and MPI. NCCL is loaded only for a run that may use it.
#include <string>

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "parallel/groups.hpp"
#include "runtime/device.hpp"

namespace mt {

// parallel.comm = "nccl" where NCCL cannot be loaded: a UserError naming the key, why and what to do.
// Needs no device, so a run checks it before any device work.
void require_nccl_if_asked(const Config& cfg);

struct TransportChoice {
  DeviceTransport transport = DeviceTransport::staged;
  std::string no_nccl;  // why "auto" stages where it would take NCCL (a rank cannot load it); else empty
};

// The transport, called by every rank of `world` with the device it computes on. "auto" takes NCCL
// for several ranks on GPUs of their own when every one of them can load it. parallel.comm = "nccl"
// on a rank without a GPU of its own: a UserError.
TransportChoice choose_transport(const Config& cfg, const DeviceChoice& device, Comm& world);

}  // namespace mt
