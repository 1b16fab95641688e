#pragma once
// The communicators of one rank, cut from the world by its coordinates. A run without mpirun
// gets one-rank groups, so every code path is the same for one rank and many.
#include <memory>

#include "comm/comm.hpp"
#include "comm/device_comm.hpp"
#include "model/params.hpp"
#include "parallel/layout.hpp"

namespace mt {

struct ParallelGroups {
  ParallelLayout layout;
  RankCoords me;
  Comm* world = nullptr;
  // Each group moves payloads in device memory (activations, gradients, weights); all are split
  // from one communicator over the world, which under NCCL is one NCCL communicator.
  struct Device {
    std::unique_ptr<DeviceComm> world, tp, dp, ep, expert_replicas, pp, mirror, embedding;
  } dev;
  // The same groups for counts and scalars in host memory: each device group's host().
  Comm* tp = nullptr;               // same dp and pp: heads and FFN units split here
  Comm* dp = nullptr;               // same tp and pp: replicas of the dense weights
  Comm* ep = nullptr;               // one expert-parallel group of a stage: tokens travel here
  Comm* expert_replicas = nullptr;  // same pp and expert-parallel rank: replicas of the experts
  Comm* pp = nullptr;               // same tp and dp: the stages of one pipeline
  Comm* mirror = nullptr;           // DualPipe: pipeline ranks r and pp-1-r; else this rank alone
  Comm* embedding = nullptr;        // tied embedding: pipeline ranks 0 and pp-1; else this rank alone
};

// How the device communicators move payloads: NCCL between GPUs, one per rank; or staged through
// host memory and the host Comm (CPU ranks, ranks sharing a GPU).
enum class DeviceTransport { staged, nccl };

ParallelGroups make_groups(Comm& world, const ParallelLayout& layout, const Backend& backend,
                           DeviceTransport transport = DeviceTransport::staged);

// Whether this rank holds the copy of a parameter that speaks for all its copies (in norms and
// checkpoints): the first data-parallel rank, the first tensor-parallel rank unless the
// parameter is split there, the first replica of routed experts, the lower rank of a DualPipe
// pair, and never the last stage's copy of the embedding. `any_data_parallel_rank`: leave the
// data-parallel position out (ZeRO-1: the rank whose shard holds the element speaks for it).
bool first_copy(const ParamInfo& p, const ParallelGroups& g, bool any_data_parallel_rank = false);
// Whether this rank speaks for state that every rank of its pipeline stage holds whole (a
// replicated parameter, the router biases).
bool first_replica(const ParallelGroups& g);

}  // namespace mt
