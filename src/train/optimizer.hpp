#pragma once
// The optimizer of one rank in any layout. After a step's gradients are accumulated it sums
// every parameter's gradient over the ranks that hold a copy of it:
//   everything over a DualPipe pair (both hold the same stages), the embedding over the first
//     and last pipeline stages when both hold it;
//   tensor_partial parameters over the tensor-parallel group (each rank's heads gave a part);
//   routed experts over their replicas (ranks of the stage with the same expert-parallel rank);
//   every other parameter over the data-parallel group.
// Then it clips by the global norm and applies AdamW. With ZeRO-1 the dense parameters' AdamW
// moments are sharded over the data-parallel group: gradients are reduce-scattered, each rank
// updates its 1/dp of the dense weights, and the updated weights are all-gathered. Routed
// experts keep whole moments on their ranks (they are already split ep ways).
// Moments, packed gradients and shards are device buffers of the parameters' backend; the norm,
// the clipping and AdamW are ops, and the groups' DeviceComms move the packed device buffers.
#include <cstddef>
#include <vector>

#include "config/config.hpp"
#include "model/params.hpp"
#include "tensor/buffer.hpp"
#include "parallel/groups.hpp"

namespace mt {

class Optimizer {
 public:
  Optimizer(ParamStore& params, const OptimizerConfig& cfg, const ParallelGroups& groups, bool zero1);

  // Sums the gradients over their copies; returns the global L2 norm of the gradient.
  double reduce_gradients();
  void scale_gradients(float factor);
  // AdamW step t (1-based) at learning rate lr.
  void step(double lr, long t);

  // The moments of every parameter this rank holds, in the ParamStore's layout (checkpoints).
  // Collective over the data-parallel group under ZeRO-1.
  void export_moments(std::vector<float>& m, std::vector<float>& v);
  void import_moments(const std::vector<float>& m, const std::vector<float>& v);
  size_t moment_floats() const { return m_.count(); }
  // Everything the optimizer holds on the device: the moments and ZeRO-1's packed gradients and shard.
  size_t state_floats() const { return m_.count() + v_.count() + packed_.count() + shard_grad_.count(); }
  const ParallelGroups& groups() const { return g_; }

 private:
  // A stretch of one parameter this rank updates; its gradient is at grad_offset in the ZeRO
  // shard buffer (sharded) or at the parameter's own offset (not).
  struct Run {
    int param = 0;
    size_t begin = 0, len = 0;  // elements of the parameter
    size_t moment = 0;          // offset in m_ and v_
    bool sharded = false;
    size_t grad_offset = 0;
  };
  // Copies the listed parameters' parts of `from` (ParamStore layout, device) into a packed device
  // buffer and back.
  size_t packed_size(const std::vector<int>& ids) const;
  void pack(const std::vector<int>& ids, const float* from, float* to) const;
  void unpack(const std::vector<int>& ids, const float* from, float* to) const;
  // Sums the listed parameters' gradients over `group`.
  void sum_over(const std::vector<int>& ids, DeviceComm& group);
  const Backend& be() const { return params_.backend(); }

  ParamStore& params_;
  OptimizerConfig cfg_;
  const ParallelGroups& g_;
  bool zero1_;
  std::vector<int> dense_, experts_, partial_, embedding_;
  std::vector<int> by_name_;  // every parameter, ordered by name
  size_t shard_ = 0;                // ZeRO-1: dense elements per data-parallel rank (padded)
  Buffer packed_, shard_grad_;
  std::vector<Run> runs_;
  Buffer m_, v_;
};

}  // namespace mt
