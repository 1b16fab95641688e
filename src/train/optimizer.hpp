#pragma once
// The optimizer of one rank in any layout. After a step's gradients are accumulated it sums
// every parameter's gradient over the ranks that hold a copy of it:
//   everything over a DualPipe pair (both hold the same stages), the embedding over the first
//     and last pipeline stages when both hold it;
//   tensor_partial parameters over the tensor-parallel group (each rank's heads gave a part);
//   routed experts over their replicas (ranks of the stage with the same expert-parallel rank);
//   every other parameter over the data-parallel group.
// Then it clips by the global norm and applies AdamW. The norm is one multi-tensor op over this
// rank's runs, summed over the ranks on the device; clipping and AdamW read it there, so the host
// never waits inside a step. Every buffer a step uses is allocated here, none per step.
// ZeRO (over the data-parallel group; routed experts are already split ep ways and stay whole):
//   1  each dense parameter is cut into dp equal pieces; data-parallel rank r keeps piece r's AdamW
//      moments. The step's gradients are reduce-scattered, each rank updates its pieces, and the
//      updated weights are all-gathered.
//   2  the same, and the dense gradients have no full-size storage: each group of them that a
//      micro-batch's backward completes (a block, the head, the embedding: Model::grad_groups) is
//      written into a window lent for the group, reduce-scattered at once and added to this rank's
//      pieces. The other sums above then run on the pieces (every rank of those groups holds the
//      same pieces).
//   3  the same, and the dense weights have no full-size storage either (FSDP): this rank's pieces
//      are the master copy AdamW updates, and each group a pass reads (Model::value_groups) is
//      all-gathered into a window just before and given back after, in forward and backward.
// optimizer.kind = "muon" (train/muon.hpp): Muon updates the hidden matrices, its momentum buffer in
// the place of AdamW's first moment and no second (checkpoints keep it as exp_avg, exp_avg_sq zero
// there), AdamW the rest. The momentum is elementwise, so it lives where AdamW's moment would: whole, in ZeRO's
// pieces, in tensor-parallel slices. The iteration needs the whole matrix (train/optimizer_muon.cpp):
//   whole on the rank (tp = 1 without ZeRO, routed experts): that rank orthogonalises it;
//   ZeRO pieces: every piece's momentum update is all-gathered, one owner per matrix (balanced by
//     size over the data-parallel ranks) orthogonalises it, the others zero it, and a reduce-scatter
//     hands each rank its piece of the owner's result (a sum with zeros: exact);
//   tensor-parallel slices: the slices are all-gathered over the tp group, every tp rank (the owner
//     under ZeRO) orthogonalises the whole matrix and keeps its own slice.
// Moments, packed gradients and shards are device buffers of the parameters' backend; the norm,
// the clipping and AdamW are ops, and the groups' DeviceComms move the packed device buffers.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "model/params.hpp"
#include "ops/backend/device_timer.hpp"
#include "ops/backend/op_profile.hpp"
#include "parallel/groups.hpp"
#include "tensor/buffer.hpp"
#include "train/muon.hpp"

namespace mt {

class Optimizer : public ParamShards {
 public:
  // `zero`: the ZeRO stage; it shards only with more than one data-parallel rank. Stages 2 and 3
  // take the gradients from `model` as its backward passes complete them; 3 lends it the weights.
  Optimizer(Model& model, const OptimizerConfig& cfg, const ParallelGroups& groups, int zero);
  ~Optimizer() override;

  // Sums the gradients over their copies and adds the square of the global L2 norm of the gradient
  // to guard[0] (device memory, StepScalars::norm_sq); guard[1] (the loss check) is summed over
  // every rank with it.
  void reduce_gradients(double* guard);
  // Clips the gradients to norm `clip` by the squared norm at norm_sq (device memory).
  void clip_gradients(const double* norm_sq, double clip);
  // Uploads AdamW's coefficients of step t (1-based) at learning rate lr, which the next step() reads
  // on the device: its launches are the same every step.
  void load_step(double lr, long t);
  // AdamW with the coefficients load_step() uploaded, unless `guard` (AdamwArgs) fails on the device.
  void step(const double* guard = nullptr);

  // The moments of every parameter this rank holds, in the ParamStore's layout (checkpoints).
  // Collective over the data-parallel group under ZeRO.
  void export_moments(std::vector<float>& m, std::vector<float>& v);
  void import_moments(const std::vector<float>& m, const std::vector<float>& v);
  // The weights likewise (ZeRO-3 holds pieces; otherwise the ParamStore's values).
  std::vector<float> export_values();
  void import_values(const std::vector<float>& values);
  size_t moment_floats() const { return m_.count(); }
  // What holds gradients on the device: the parameters' own, and under ZeRO-2 this rank's pieces,
  // the windows and the reduce-scatter's buffers.
  size_t gradient_floats() const;
  // The rest of the optimizer's device state: the moments, Muon's update and scratch, and ZeRO-1's
  // pieces and packed buffer.
  size_t state_floats() const;
  // What holds weights: the parameters' own, and under ZeRO-3 this rank's pieces and the windows.
  size_t weight_floats() const;
  const ParallelGroups& groups() const { return g_; }
  // --profile: Muon's gathers and scatters of matrices cut by ZeRO or tp are timed from here on, and
  // take_muon_communication() returns their time since the last call as a row of the op profile
  // (none where no matrix is cut).
  void time_muon_communication();
  std::optional<OpKindTime> take_muon_communication();

  // ParamShards (ZeRO-2, 3).
  void open(int chunk, const std::vector<int>& ids) override;
  void close(int chunk) override;
  void gather(int chunk, const std::vector<int>& ids) override;
  void release(int chunk) override;

 private:
  // A stretch of one parameter this rank updates; its gradient is at grad_offset in the pieces
  // buffer (sharded) or at the parameter's own gradient (not).
  struct Run {
    int param = 0;
    size_t begin = 0, len = 0;  // elements of the parameter
    size_t moment = 0;          // offset in m_
    bool sharded = false;
    size_t grad_offset = 0;
    size_t second = 0;  // offset in v_, AdamW's second moment (Muon's matrices have none)
  };
  // Piece r of a sharded parameter: elements [r * piece, min(numel, (r + 1) * piece)).
  struct Piece {
    size_t size = 0;  // elements per rank, the last ranks' padded with zeros
    size_t at = 0;    // offset in this rank's pieces buffer (shard_grad_, mine)
  };
  // Where a parameter's data begins, by id (pack_pieces' and all_gather_pieces' instance for Muon).
  using IdPointer = std::function<float*(int)>;
  size_t piece_len(int id, int rank) const;
  // ids' pieces of the parameters' `from` (device, element 0 of each parameter at from(id)) into
  // a [ranks][sum of ids' pieces] buffer, zero-padded: rank r's section holds every piece r.
  template <class From>
  void pack_pieces(const std::vector<int>& ids, From from, float* to) const;
  // The reverse, over the data-parallel group: this rank's piece of each of `ids` (sharded, at
  // mine(id)) goes out through `stage`, and every rank's piece lands in the whole parameter at to(id).
  template <class Mine, class To>
  void all_gather_pieces(const std::vector<int>& ids, Mine mine, float* stage, To to, DeviceComm& dp) const;
  size_t pieces_size(const std::vector<int>& ids) const;
  // Sums the listed parameters' gradients over `group`: their pieces where sharded.
  void sum_over(const std::vector<int>& ids, DeviceComm& group);
  float* gradient_of(int id) const;  // a parameter's full gradient, or its pieces where sharded
  float* value_of(const Run& r) const;  // where AdamW updates a run
  // The full layout (ParamStore offsets) of every parameter from this rank's `stored` (values or
  // moments: the unsharded runs at `at(run)`) and every rank's pieces (`pieces`, shard_ each).
  template <class At>
  void assemble(const std::vector<float>& stored, At at, const std::vector<float>& pieces,
                std::vector<float>& full) const;
  size_t gradient_size(int id) const;
  // All-gathers the updated pieces into every rank's weights, in batches that fit the packed buffer.
  void gather_weights();
  // The buffers reduce_gradients needs, and the device arrays of the runs the norm counts.
  void allocate_step_buffers();
  // Muon's matrices (muon_), their owners, its update buffer and the Newton-Schulz iteration's scratch;
  // AdamW's second moments (v_), which only the parameters AdamW updates have.
  void allocate_muon();
  // Muon's step on a parameter this rank holds unsharded (run r), joining tensor-parallel slices.
  void muon_step(const Run& r, const double* guard);
  // The step of the matrices in ZeRO's pieces, whose momentum step() left in place of their gradients.
  void muon_pieces_step(const double* guard);
  // Orthogonalises parameter id's update at x (this rank's slice, the whole matrix unless tp-split).
  void orthogonalise(int id, float* x);
  bool tp_sliced(int id) const;
  const Backend& be() const { return params_.backend(); }
  bool sharded(int id) const { return pieces_[size_t(id)].size > 0; }

  ParamStore& params_;
  Model& model_;
  OptimizerConfig cfg_;
  const ParallelGroups& g_;
  int zero_ = 0;  // 0 unless dp > 1
  std::vector<int> dense_, experts_, partial_, embedding_;
  std::vector<int> by_name_;  // every parameter, ordered by name
  std::vector<int> sharded_;  // ZeRO: the dense parameters by name, the pieces buffer's order
  std::vector<Piece> pieces_;  // [parameter]; size 0: not sharded
  size_t shard_ = 0;            // this rank's pieces, elements
  size_t batch_ = 0;            // ZeRO: elements per rank the packed buffer holds
  Buffer packed_, shard_grad_, received_;
  Buffer shard_values_;  // ZeRO-3: this rank's pieces of the dense weights
  Buffer summed_, experts_summed_, gather_stage_;  // sum_over's, the experts' sum's, gather_weights'
  Buffer norm_runs_, norm_lengths_;  // device arrays: each counted run's gradient and length
  int norm_run_count_ = 0;
  size_t norm_elements_ = 0;
  std::vector<Run> runs_;
  Buffer m_, v_;
  Buffer step_values_;  // AdamwStepValues of the step, on the device
  std::vector<MuonMatrix> muon_;  // [parameter]
  Buffer muon_values_, muon_update_, muon_work_;  // MuonStepValues; the update; the iteration's scratch
  std::vector<int> muon_owner_;  // [parameter]: the data-parallel rank that orthogonalises its pieces
  std::vector<int> muon_pieces_;  // the Muon matrices in ZeRO's pieces, in sharded_'s order
  // ZeRO-2/3: the gathered matrices of a batch; tp: a whole matrix and the gather's landing place.
  Buffer muon_full_, muon_whole_, muon_slices_;
  // The groups Muon's gathers and scatters use: the groups' own, or timed under --profile.
  DeviceComm* muon_dp_ = nullptr;
  DeviceComm* muon_tp_ = nullptr;
  std::unique_ptr<DeviceTimer> muon_timer_;
  std::unique_ptr<DeviceComm> timed_dp_, timed_tp_;
  double muon_host_seconds_ = 0;
  long long muon_calls_ = 0;
  // ZeRO-2/3: a window per chunk for the open group's gradients, and which group is open; ZeRO-3:
  // the same for the gathered values.
  std::vector<Buffer> windows_, value_windows_;
  std::vector<std::vector<int>> open_, gathered_;
  bool accumulating_ = false;  // the pieces hold this step's gradients so far
};

}  // namespace mt
