#pragma once
// The scalars of one optimizer step, in one f64 device buffer allocated once: the losses, the
// gradient norm and the check that decides whether the update applies, each forward pass's loss
// sums, and a copy of every MoE layer's expert loads and biases. The ops add into it on the device
// (their `sum`), and one download at the end of the step brings all of it to the host for the log,
// the progress line and the non-finite stop: the host waits for nothing in between.
#include <vector>

#include "model/model.hpp"
#include "tensor/buffer.hpp"

namespace mt {

class StepScalars {
 public:
  enum Slot {
    ce,          // cross-entropy summed over this rank's tokens of the step
    aux,         // the balance-loss terms of this rank's forwards
    mtp,         // the MTP losses, each depth's divided as the objective weighs it
    global_aux,  // a global-batch balance loss (the same on every data-parallel rank)
    norm_sq,     // the squared gradient norm over every rank
    loss_check,  // 0 while ce is finite on every rank, else NaN; norm_sq and loss_check: the update's guard
    fixed_slots
  };

  // `forwards`: the forward passes of this rank's program per step; `mtp_divisor`: LossSums'.
  StepScalars(Model& model, int forwards, double mtp_divisor);

  // Zeroes every slot, queued on the model's backend (before the step's first forward).
  void zero() const;
  double* at(Slot s) const { return buf_.f64() + s; }
  // Where the step's forward pass i (in program order) adds its losses.
  LossSums forward_sums(int i) const;
  // Adds the forward passes' sums into ce, aux and mtp, in program order; then loss_check. Queued on
  // the model's backend after everything the forwards queued.
  void sum_forwards() const;
  // The guard of the update's ops: norm_sq and loss_check (AdamwArgs::guard).
  const double* guard() const { return at(norm_sq); }
  // Copies the MoE layers' loads and biases in and downloads the whole buffer: the step's one wait.
  void download();

  // After download(): a slot, and MoE layer i's (of this rank, Model::moe_layers' order) loads and biases.
  double value(Slot s) const { return host_[size_t(s)]; }
  std::vector<double> load(int i) const;
  std::vector<float> bias(int i) const;

 private:
  size_t load_at(int i) const { return parts_ + size_t(i) * experts_; }
  size_t bias_at(int i) const { return parts_ + size_t(layers_) * experts_ + size_t(i) * bias_words_; }

  Model& model_;
  int forwards_, depth_, layers_, experts_;
  double mtp_divisor_;
  size_t parts_;       // first slot after the forwards' sums
  size_t bias_words_;  // doubles holding one layer's float biases
  Buffer buf_;
  std::vector<double> host_;
};

}  // namespace mt
