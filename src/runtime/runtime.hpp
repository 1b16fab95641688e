#pragma once
// What a training run computes and communicates on, in one owner: the device, the streams opened
// on it, the communicators cut from the world, those of each model chunk (ordered after its
// stream), the timers on them and the device's counters. The members are declared in the order they
// must exist (the counters first: every backend copy points at them), so the
// default destructor tears them down in reverse: chunk communicators and then the groups before
// the streams and device they live on (a group's children before the world communicator they were
// split from, by ParallelGroups' own member order), timers before their streams, streams before
// the device.
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/device_comm.hpp"
#include "config/config.hpp"
#include "model/model.hpp"
#include "ops/backend/device_timer.hpp"
#include "parallel/groups.hpp"
#include "runtime/device.hpp"
#include "runtime/transport.hpp"

namespace mt {

class Runtime {
 public:
  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Refuses parallel.comm = "nccl" without NCCL before any device work, chooses the device with
  // room for `slots` micro-batches, gathers every rank's device description, chooses the transport
  // and cuts the groups of [parallel] from `world`. Collective over `world`.
  void open(const Config& cfg, Comm& world, int slots);
  // Gives each model chunk of `stages` (none: one chunk, the whole model) its stream and its timed
  // tensor- and expert-parallel communicators; the first chunk computes on the device's stream and
  // talks over the groups' own. With `side_streams`, each chunk also gets a second stream for the
  // MoE's shared experts; `stages` then holds at least the whole model as its one chunk.
  void open_chunks(std::vector<StageSpec>& stages, bool side_streams);
  // The first chunk's timed tensor- and expert-parallel communicators.
  DeviceComm* layer_tp() const { return chunk_comms[0].get(); }
  DeviceComm* layer_ep() const { return chunk_comms[1].get(); }

  struct CommSeconds { double tp = 0, ep = 0; };
  struct CommTimers { std::unique_ptr<DeviceTimer> tp, ep; };

  std::unique_ptr<DeviceCounters> counters = std::make_unique<DeviceCounters>();
  Device device;
  std::vector<std::string> rank_devices;  // every rank's device description, by world rank
  TransportChoice transport;
  Streams streams;
  // training.cuda_graph: the passes' graphs, on the device's streams (destroyed before them).
  std::unique_ptr<GraphCapture> graph;
  std::vector<CommSeconds> comm_seconds;  // this step's host-side part, per model chunk
  std::vector<CommTimers> comm_timers;    // the device-side part, per model chunk
  ParallelGroups groups;
  // The first chunk's timed tp and ep groups, then each later chunk's.
  std::vector<std::unique_ptr<DeviceComm>> chunk_comms;

 private:
  DeviceComm* chunk_comm(DeviceComm& group, size_t chunk, double* seconds, DeviceTimer* timer);
};

}  // namespace mt
