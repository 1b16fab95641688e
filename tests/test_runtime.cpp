// The runtime a training run computes on: one stream and one pair of timed communicators per model
// chunk (the first chunk's on the device's own stream), side streams for the shared experts, and
// what the model's chunks are given of them.
#include <doctest/doctest.h>

#include <vector>

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "runtime/one_rank.hpp"
#include "runtime/runtime.hpp"
#include "test_helpers.hpp"

namespace {

mt::Config strict_config() { return mt::parse_config("", "test.toml", {"precision.device=cpu-strict"}); }

}  // namespace

TEST_CASE("runtime: each later chunk gets a stream and communicators of its own, the first the device's") {
  const auto world = mt::make_local_comm();
  mt::Runtime rt;
  rt.open(strict_config(), *world, 1);
  CHECK(testing::contains(rt.device.choice.description, "cpu-strict"));
  REQUIRE(rt.rank_devices.size() == 1);
  CHECK(rt.rank_devices[0] == rt.device.choice.description);
  CHECK(rt.transport.transport == mt::DeviceTransport::staged);

  std::vector<mt::StageSpec> stages{{0, 1, true, false}, {1, 2, false, true}};
  rt.open_chunks(stages, false);
  REQUIRE(rt.streams.chunk.size() == 2);
  CHECK(rt.streams.chunk[0].state == rt.device.choice.backend.state);
  CHECK(rt.streams.chunk[1].state != rt.device.choice.backend.state);  // a strict stream of its own
  CHECK(rt.streams.side.empty());
  CHECK(rt.comm_seconds.size() == 2);
  CHECK(rt.comm_timers.size() == 2);
  CHECK(rt.chunk_comms.size() == 4);  // the first chunk's timed tp and ep, then the second's
  CHECK(rt.layer_tp() == rt.chunk_comms[0].get());
  CHECK(rt.layer_ep() == rt.chunk_comms[1].get());
  // The first chunk computes through the model's own backend and communicators.
  CHECK(stages[0].backend == nullptr);
  CHECK(stages[0].tp == nullptr);
  CHECK(stages[1].backend == &rt.streams.chunk[1]);
  CHECK(stages[1].tp == rt.chunk_comms[2].get());
  CHECK(stages[1].ep == rt.chunk_comms[3].get());
}

TEST_CASE("runtime: side streams, one per chunk, for the shared experts") {
  const auto world = mt::make_local_comm();
  mt::Runtime rt;
  rt.open(strict_config(), *world, 1);
  std::vector<mt::StageSpec> stages{{0, 2, true, true}};
  rt.open_chunks(stages, true);
  REQUIRE(rt.streams.side.size() == 1);
  CHECK(rt.streams.side[0].state != rt.device.choice.backend.state);
  CHECK(stages[0].side == &rt.streams.side[0]);
  CHECK(rt.chunk_comms.size() == 2);
}

TEST_CASE("one rank: its groups are the whole world") {
  const mt::OneRank one(mt::cpu_backend());
  CHECK(one.world->size() == 1);
  CHECK(one.groups.layout.world() == 1);
  CHECK(one.groups.dev.tp->size() == 1);
}
