#include "parallel/groups.hpp"

#include <algorithm>

#include "comm/nccl_comm.hpp"
#include "comm/staged_comm.hpp"

namespace mt {

ParallelGroups make_groups(Comm& world, const ParallelLayout& l, const Backend& backend, DeviceTransport transport) {
  ParallelGroups g;
  g.layout = l;
  g.world = &world;
  const RankCoords c = g.me = coords_of(l, world.rank());
  const int groups_per_stage = l.stage_ranks() / l.ep;
  auto& d = g.dev;
  d.world = transport == DeviceTransport::nccl ? make_nccl_comm(world, backend) : make_staged_comm(world, backend);
  // Every rank splits in the same order: each split is collective over the communicator split.
  d.tp = d.world->split(c.dp + l.dp * c.pp, c.tp);
  d.dp = d.world->split(c.tp + l.tp * c.pp, c.dp);
  d.ep = d.world->split(c.ep_group + groups_per_stage * c.pp, c.ep);
  d.expert_replicas = d.world->split(c.ep + l.ep * c.pp, c.ep_group);
  d.pp = d.world->split(c.tp + l.tp * c.dp, c.pp);
  // Pipeline transfers run on a link per neighbour and direction, so a receive posted early holds
  // up no send (see nccl_comm.hpp).
  open_ring_links(*d.pp);
  const int partner = l.pp - 1 - c.pp;
  d.mirror = d.pp->split(l.mirrored ? std::min(c.pp, partner) : c.pp, c.pp);
  const bool holds_embedding = c.pp == 0 || c.pp == l.pp - 1;
  d.embedding = d.pp->split(l.tied_embedding && holds_embedding ? 0 : 1 + c.pp, c.pp);
  g.tp = &d.tp->host();
  g.dp = &d.dp->host();
  g.ep = &d.ep->host();
  g.expert_replicas = &d.expert_replicas->host();
  g.pp = &d.pp->host();
  g.mirror = &d.mirror->host();
  g.embedding = &d.embedding->host();
  g.tp->set_label("the tensor-parallel communicator");
  g.dp->set_label("the data-parallel communicator");
  g.ep->set_label("the expert-parallel communicator");
  g.expert_replicas->set_label("the experts' replica communicator");
  g.pp->set_label("the pipeline communicator");
  g.mirror->set_label("the DualPipe pair's communicator");
  g.embedding->set_label("the embedding's communicator");
  return g;
}

bool first_copy(const ParamInfo& p, const ParallelGroups& g, bool any_data_parallel_rank) {
  if (p.pipeline_copy || g.mirror->rank() != 0) return false;
  if (p.spread == Spread::expert_split) return g.expert_replicas->rank() == 0;
  return (any_data_parallel_rank || g.me.dp == 0) && (p.spread == Spread::tensor_split || g.me.tp == 0);
}

bool first_replica(const ParallelGroups& g) { return g.mirror->rank() == 0 && g.me.dp == 0 && g.me.tp == 0; }

}  // namespace mt
