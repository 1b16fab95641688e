#include "train/forward_only.hpp"

#include <algorithm>

#include "comm/device_comm.hpp"

namespace mt {

std::pair<double, long> pipeline_forward_only(Model& model, const pipeline::Placement& pl, const ParallelGroups& g,
                                              int sequences, int micro_batch, const FillSequences& fill,
                                              TransferBuffers& buffers) {
  const int me = g.me.pp;
  DeviceComm& pp = *g.dev.pp;
  const Backend& main = buffers.backend();  // where the pipeline group's transfers queue
  std::vector<int> inputs, targets;
  std::vector<double> sums{0.0, 0.0};  // cross-entropy, tokens
  Buffer carried = buffers.take(main);  // sized for a whole micro-batch: a smaller one uses its front
  for (int first = 0; first < sequences; first += micro_batch) {
    const int count = std::min(micro_batch, sequences - first);
    const size_t floats = carried.count() * size_t(count) / size_t(micro_batch);
    fill(first, count, inputs, targets);
    int used_chunk = -1;
    for (int pos = 0; pos < pl.stages; ++pos) {
      const pipeline::Slot here = pl.slot(0, pos);
      const int before = pos > 0 ? pl.slot(0, pos - 1).rank : -1;
      if (here.rank != me) {
        if (before == me) pp.send(device_span(carried.f32(), floats), here.rank);
        continue;
      }
      if (pos > 0 && before != me) pp.recv(device_span(carried.f32(), floats), before);
      const Backend& be = model.backend(here.chunk);
      order_after(be, main);  // what arrived, and the weights
      const ForwardResult r = model.forward(here.chunk, 0, {inputs.data(), targets.data(), count},
                                            pos > 0 ? carried.f32() : nullptr,
                                            {.ce = 0.0f, .aux = 0.0f, .mtp = 0.0f, .backward = false});
      sums[0] += r.ce_sum;
      sums[1] += double(r.tokens);
      if (pos + 1 < pl.stages) be.copy(carried.f32(), model.output(here.chunk, 0), floats * sizeof(float));
      order_after(main, be);  // before the next send, receive or copy into it
      if (used_chunk >= 0) model.retire(used_chunk, 0);
      used_chunk = here.chunk;
    }
    if (used_chunk >= 0) model.retire(used_chunk, 0);
  }
  buffers.give(std::move(carried), main);
  g.pp->all_reduce_sum(sums);
  return {sums[0], long(sums[1])};
}

}  // namespace mt
