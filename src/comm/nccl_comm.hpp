#pragma once
// NcclComm: DeviceComm over NCCL, one GPU per rank. Defined in src/comm/nccl_comm.cu in CUDA builds;
// src/comm/nccl_stub.cpp says that NCCL needs one otherwise, so callers need no #ifdef.
//
// - NCCL is not linked: src/comm/nccl_library.cu loads libnccl.so.2 (or the library the environment
//   variable MOETRAIN_NCCL_LIBRARY names, a path or a soname) the first time a run asks for it, so the
//   binary starts without it.
// - Made collectively by every rank of `host`: rank 0 creates NCCL's unique id and sends it to the
//   others over `host` (MPI), then each rank joins with ncclCommInitRank on the backend's GPU.
//   split() makes sub-communicators by ncclCommSplit, with host().split() beside each (a run's
//   groups are all split from one communicator over the world).
// - Every call runs on the communicator's own stream, after the ops queued on the backend's stream
//   before it (an event between them), so a payload is read once written. A blocking call makes the
//   backend's stream wait for the result, so the next op sees it without a host wait. A non-blocking
//   call's Request holds an event recorded after it; wait() makes the backend's stream wait on that
//   event and returns at once. Until then the backend's stream runs on: the MoE layer computes its
//   shared experts while the routed tokens travel.
// - isend and irecv are held until a wait() of this communicator's requests or its next other call,
//   then issued together in one ncclGroupStart/ncclGroupEnd: NCCL's send and receive block the
//   stream until their partner arrives, so a receive posted before the matching send (to oneself,
//   or before a send the peer makes only after receiving) would otherwise stall the stream.
// - With ring links (a pipeline group's; open_ring_links), isend and irecv to a ring neighbour (rank +-1, and rank
//   0 with the last) go at once to a link of their own: a two-rank communicator per neighbour and
//   direction, split from this one, that only this direction's messages use, on a stream of its
//   own. A receive posted early then blocks nothing but later messages of the same link, which
//   match in order anyway, so the pipeline's transfers flow while the stage computes. Each link
//   is connected as it is made (one float each way): NCCL connects a pair on its first send and
//   receive with the host waiting for the peer, which a receive posted early must not do.
// - Every NCCL result is checked, also the communicator's asynchronous error; a failure throws
//   std::runtime_error naming the rank, the group size, the call and NCCL's message.
#include <memory>
#include <string>

#include "comm/device_comm.hpp"
#include "ops/ops.hpp"

namespace mt {

// Whether this process can use NCCL: the library loads (on the first call; later calls give the same
// answer) and is new enough. Otherwise false, with what is wrong and what to do in *why (when non-null).
bool nccl_available(std::string* why);

// For tests: whether the NCCL library `library` (a path or a soname) loads and is new enough; false with
// the reason in *why. The process's own NCCL (nccl_available) is unaffected.
bool nccl_loads(const std::string& library, std::string* why);

// A collective over `host`. `backend` must be the CUDA backend of this rank's GPU and outlive the
// communicator, as must `host`.
std::unique_ptr<DeviceComm> make_nccl_comm(Comm& host, const Backend& backend);

// Opens the ring links of an NcclComm, collectively over its ranks. Other communicators need none
// (a posted receive never holds up their sends) and are left as they are.
void open_ring_links(DeviceComm& comm);

}  // namespace mt
