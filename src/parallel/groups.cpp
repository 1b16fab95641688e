#include "parallel/groups.hpp"

#include <algorithm>

#include "comm/nccl_comm.hpp"
#include "comm/staged_comm.hpp"

namespace mt {

std::unique_ptr<DeviceComm> make_device_comm(Comm& host, const Backend& backend, DeviceTransport transport) {
  return transport == DeviceTransport::nccl ? make_nccl_comm(host, backend) : make_staged_comm(host, backend);
}

ParallelGroups make_groups(Comm& world, const ParallelLayout& l, const Backend& backend, DeviceTransport transport) {
  ParallelGroups g;
  g.layout = l;
  g.world = &world;
  const RankCoords c = g.me = coords_of(l, world.rank());
  const int groups_per_stage = l.stage_ranks() / l.ep;
  // Every rank calls split in the same order: each call is collective over the world.
  g.tp = world.split(c.dp + l.dp * c.pp, c.tp);
  g.dp = world.split(c.tp + l.tp * c.pp, c.dp);
  g.ep = world.split(c.ep_group + groups_per_stage * c.pp, c.ep);
  g.expert_replicas = world.split(c.ep + l.ep * c.pp, c.ep_group);
  g.pp = world.split(c.tp + l.tp * c.dp, c.pp);
  const int partner = l.pp - 1 - c.pp;
  g.mirror = g.pp->split(l.mirrored ? std::min(c.pp, partner) : c.pp, c.pp);
  const bool holds_embedding = c.pp == 0 || c.pp == l.pp - 1;
  g.embedding = g.pp->split(l.tied_embedding && holds_embedding ? 0 : 1 + c.pp, c.pp);
  // Each NCCL communicator is made over its host group (unique id through MPI), collectively over
  // that group; every rank makes them in the same order, so no two groups wait on each other.
  auto device = [&](Comm& host) { return make_device_comm(host, backend, transport); };
  g.dev.tp = device(*g.tp);
  g.dev.dp = device(*g.dp);
  g.dev.ep = device(*g.ep);
  g.dev.expert_replicas = device(*g.expert_replicas);
  // Pipeline transfers run on a link per neighbour and direction, so a receive posted early blocks
  // no send (see nccl_comm.hpp).
  g.dev.pp = transport == DeviceTransport::nccl ? make_nccl_comm(*g.pp, backend, NcclLinks::ring)
                                                 : make_staged_comm(*g.pp, backend);
  g.dev.mirror = device(*g.mirror);
  g.dev.embedding = device(*g.embedding);
  return g;
}

bool first_copy(const ParamInfo& p, const ParallelGroups& g, bool any_data_parallel_rank) {
  if (p.pipeline_copy || g.mirror->rank() != 0) return false;
  if (p.spread == Spread::expert_split) return g.expert_replicas->rank() == 0;
  return (any_data_parallel_rank || g.me.dp == 0) && (p.spread == Spread::tensor_split || g.me.tp == 0);
}

bool first_replica(const ParallelGroups& g) { return g.mirror->rank() == 0 && g.me.dp == 0 && g.me.tp == 0; }

}  // namespace mt
