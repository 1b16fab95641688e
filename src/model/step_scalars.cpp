#include "model/step_scalars.hpp"

#include <cstring>

#include "model/moe.hpp"
#include "ops/backend/mark.hpp"

namespace mt {

// Layout: the fixed slots; ce, aux of each forward; mtp of each forward and depth; the loads
// [layers][experts]; the biases' bytes, a whole number of doubles per layer.
StepScalars::StepScalars(Model& model, int forwards, double mtp_divisor)
    : model_(model), forwards_(forwards), depth_(model.config().mtp.depth),
      layers_(int(model.moe_layers().size())), experts_(model.config().moe.n_routed_experts),
      mtp_divisor_(mtp_divisor), parts_(fixed_slots + size_t(forwards) * (2 + depth_)),
      bias_words_((size_t(experts_) * sizeof(float) + sizeof(double) - 1) / sizeof(double)),
      buf_(model.backend(), DType::f64, parts_ + size_t(layers_) * (experts_ + bias_words_)),
      host_(buf_.count(), 0.0) {}

void StepScalars::zero() const { model_.backend().zero(buf_.raw(), buf_.bytes()); }

LossSums StepScalars::forward_sums(int i) const {
  double* first = buf_.f64() + fixed_slots;
  return {.ce = first + i, .aux = first + forwards_ + i, .mtp = first + 2 * forwards_ + size_t(i) * depth_,
          .mtp_stride = 1, .mtp_divisor = mtp_divisor_};
}

void StepScalars::sum_forwards() const {
  const Backend& be = model_.backend();
  for (size_t c = 0; c < model_.chunks().size(); ++c) order_after(be, model_.backend(int(c)));
  const double* first = buf_.f64() + fixed_slots;
  be.sum_scalars({.n = size_t(forwards_), .x = first, .sum = at(ce)});
  be.sum_scalars({.n = size_t(forwards_), .x = first + forwards_, .sum = at(aux)});
  be.sum_scalars({.n = size_t(forwards_) * depth_, .x = first + 2 * forwards_, .sum = at(mtp)});
  be.sum_scalars({.n = 1, .x = at(ce), .scale = 0.0, .sum = at(loss_check)});
}

void StepScalars::download() {
  const Backend& be = model_.backend();
  const std::vector<MoE*> layers = model_.moe_layers();
  for (size_t c = 0; c < model_.chunks().size(); ++c) order_after(be, model_.backend(int(c)));  // the bias update
  for (int i = 0; i < layers_; ++i) {
    const Router& router = layers[size_t(i)]->router();
    be.copy(buf_.f64() + load_at(i), router.step_load().f64(), size_t(experts_) * sizeof(double));
    be.copy(buf_.f64() + bias_at(i), model_.params.buffer(router.bias), size_t(experts_) * sizeof(float));
  }
  be.download(host_.data(), buf_.raw(), buf_.bytes());
}

std::vector<double> StepScalars::load(int i) const {
  return {host_.begin() + long(load_at(i)), host_.begin() + long(load_at(i) + experts_)};
}

std::vector<float> StepScalars::bias(int i) const {
  std::vector<float> b(static_cast<size_t>(experts_));
  std::memcpy(b.data(), host_.data() + bias_at(i), b.size() * sizeof(float));
  return b;
}

}  // namespace mt
