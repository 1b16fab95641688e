#pragma once
// The groups of a process that runs alone (export, import, dump-step): one-rank communicators on
// `backend`, beside the world they are cut from, which outlives them by member order.
#include <memory>

#include "comm/comm.hpp"
#include "parallel/groups.hpp"

namespace mt {

struct OneRank {
  explicit OneRank(const Backend& backend) : world(make_local_comm()), groups(make_groups(*world, {}, backend)) {}
  std::unique_ptr<Comm> world;
  ParallelGroups groups;
};

}  // namespace mt
