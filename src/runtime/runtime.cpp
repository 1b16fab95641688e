#include "runtime/runtime.hpp"

#include <algorithm>

#include "comm/gather_text.hpp"
#include "comm/timed_device_comm.hpp"
#include "util/error.hpp"

namespace mt {

void Runtime::open(const Config& cfg, Comm& world, int slots) {
  require_nccl_if_asked(cfg);
  device.choice = choose_device(cfg, slots);
  // Set before any copy is made: streams, communicators and the model count here too.
  device.choice.backend.counters = counters.get();
  if (cfg.training.cuda_graph) {
    if (device.choice.owned != DeviceChoice::Owned::cuda)
      throw UserError(cfg.origin.at("training.cuda_graph") + ": training.cuda_graph = true needs a GPU, but " +
                      "precision.device = \"auto\" chose " + device.choice.description +
                      "; set training.cuda_graph = false on the CPU");
    graph = std::make_unique<GraphCapture>();
    device.choice.backend.graph = graph.get();
  }
  streams.device = &device.choice;
  // Every rank takes part; only the first prints them.
  rank_devices = all_gather_text(world, device.choice.description);
  transport = choose_transport(cfg, device.choice, world);
  groups = make_groups(world, layout_of(cfg.parallel, cfg.model), device.choice.backend, transport.transport);
}

DeviceComm* Runtime::chunk_comm(DeviceComm& group, size_t chunk, double* seconds, DeviceTimer* timer) {
  chunk_comms.push_back(
      make_timed_device_comm(group.split_on(streams.chunk[chunk], 0, group.rank()), seconds, timer));
  return chunk_comms.back().get();
}

void Runtime::open_chunks(std::vector<StageSpec>& stages, bool side_streams) {
  // Each chunk computes on its own stream and talks over its own tensor- and expert-parallel
  // communicators, ordered after that stream (DualPipe runs two chunks' passes at once), each timed
  // into its own counters.
  const size_t chunks = std::max<size_t>(1, stages.size());
  comm_seconds.resize(chunks);
  streams.chunk.assign(chunks, device.choice.backend);
  for (size_t c = 1; c < chunks; ++c) streams.chunk[c] = open_stream(device.choice);
  for (size_t c = 0; c < chunks; ++c)
    comm_timers.push_back({std::make_unique<DeviceTimer>(streams.chunk[c]),
                           std::make_unique<DeviceTimer>(streams.chunk[c])});
  // The layers' communication is timed; the optimizer's sums over the same groups are the gradient
  // sum's time, so it keeps the untimed communicators.
  chunk_comms.push_back(make_timed_device_comm(*groups.dev.tp, &comm_seconds[0].tp, comm_timers[0].tp.get()));
  chunk_comms.push_back(make_timed_device_comm(*groups.dev.ep, &comm_seconds[0].ep, comm_timers[0].ep.get()));
  if (side_streams) {
    for (size_t c = 0; c < chunks; ++c) streams.side.push_back(open_stream(device.choice));
    for (size_t c = 0; c < chunks; ++c) stages[c].side = &streams.side[c];
  }
  for (size_t c = 1; c < stages.size(); ++c) {
    stages[c].backend = &streams.chunk[c];
    stages[c].tp = chunk_comm(*groups.dev.tp, c, &comm_seconds[c].tp, comm_timers[c].tp.get());
    stages[c].ep = chunk_comm(*groups.dev.ep, c, &comm_seconds[c].ep, comm_timers[c].ep.get());
  }
}

}  // namespace mt
