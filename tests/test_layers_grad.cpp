// Each block kind on its own: backward_input (dx) and backward_weight against float64 central
// finite differences of the independent reference, for the objective sum(y * r).
#include <doctest/doctest.h>

#include <cmath>

#include "model/block.hpp"
#include "naive_reference.hpp"
#include "test_helpers.hpp"

namespace {

void check_block(int index, const mt::ModelConfig& cfg = testing::tiny_model()) {
  const int batch = 2, rows = batch * cfg.seq_len, D = cfg.d_model;
  testing::StrictDevice dev;
  const mt::Backend& be = dev.be;
  mt::ParamStore params;
  mt::LayerEnv env{&be, mt::GemmPrecision::fp32, &params, {}};
  const std::string prefix = "blocks." + std::to_string(index);
  const bool is_moe = index >= cfg.n_dense_layers;
  mt::Block block(env, cfg, prefix, is_moe, 1);
  params.finalize(be, 9, cfg.init_std);
  for (size_t i = 0; i < params.buffer_names.size(); ++i)
    params.set_buffer(int(i), testing::random_floats(params.buffer_size(int(i)), 40 + i, 0.2));
  std::vector<float> x = testing::random_floats(size_t(rows) * D, 21), r = testing::random_floats(size_t(rows) * D, 22);
  const mt::Buffer x_dev = dev.upload(x), r_dev = dev.upload(r), y_dev = dev.floats(x.size()), dx_dev = dev.floats(x.size());
  mt::Arena arena(be);
  // The balance loss's own gradient is scaled by aux_grad_scale; with scale 1 the objective is
  // sum(y r) + aux.
  const mt::Buffer aux_dev(be, mt::DType::f64, 1);
  block.forward(0, arena, arena, arena, x_dev.f32(), batch, y_dev.f32(), 1.0f, aux_dev.f64());
  const double aux = aux_dev.to_host_f64()[0];
  block.backward_input(0, arena, r_dev.f32(), dx_dev.f32());
  block.backward_weight(0);
  const std::vector<float> y = y_dev.to_host_f32(), dx = dx_dev.to_host_f32(), grads = params.host_grads();

  naive::Weights w = naive::from_store(params);
  // Per-sequence groups with weight 1, as passed to forward above.
  const naive::Balance balance = cfg.moe.aux_loss == mt::BalanceLoss::none ? naive::Balance{} : naive::Balance{cfg.seq_len, 1.0};
  auto objective = [&](const naive::Weights& ww, const std::vector<double>& xx) {
    double a = 0;
    std::vector<double> yy = naive::block(ww, prefix, is_moe, xx, cfg, batch, balance, &a);
    double s = a;
    for (size_t i = 0; i < yy.size(); ++i) s += yy[i] * r[i];
    return s;
  };
  std::vector<double> xd(x.begin(), x.end());
  {
    double a = 0;
    std::vector<double> yy = naive::block(w, prefix, is_moe, xd, cfg, batch, balance, &a);
    CHECK(aux == doctest::Approx(a).epsilon(1e-5));
    for (size_t i = 0; i < yy.size(); ++i) REQUIRE(y[i] == doctest::Approx(yy[i]).epsilon(1e-4).scale(1e-5));
  }
  const double h = 1e-6;
  double max_dx = 0;
  std::vector<double> fd_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = xd[i];
    xd[i] = keep + h;
    const double up = objective(w, xd);
    xd[i] = keep - h;
    const double down = objective(w, xd);
    xd[i] = keep;
    fd_dx[i] = (up - down) / (2 * h);
    max_dx = std::max(max_dx, std::abs(fd_dx[i]));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(dx[i] - fd_dx[i]) <= 2e-4 * max_dx);
  }
  for (auto& info : params.infos) {
    CAPTURE(info.name);
    double max_g = 0;
    std::vector<double> fd(info.numel);
    for (size_t j = 0; j < info.numel; ++j) {
      double& v = w.p[info.name][j];
      const double keep = v;
      v = keep + h;
      const double up = objective(w, xd);
      v = keep - h;
      const double down = objective(w, xd);
      v = keep;
      fd[j] = (up - down) / (2 * h);
      max_g = std::max(max_g, std::abs(fd[j]));
    }
    REQUIRE(max_g > 0);
    for (size_t j = 0; j < info.numel; ++j) {
      CAPTURE(j);
      CHECK(std::abs(grads[info.offset + j] - fd[j]) <= 2e-4 * max_g);
    }
  }
}

}  // namespace

TEST_CASE("dense block: backward_input and backward_weight match finite differences") { check_block(0); }

TEST_CASE("dense block with each attention kind (GQA, MLA with and without query compression)") {
  for (auto& [name, cfg] : testing::attention_variants()) {
    CAPTURE(name);
    check_block(0, cfg);
  }
}

TEST_CASE("MoE block (shared + routed experts, group-limited, balance loss): backward matches finite differences") {
  check_block(1);
}

TEST_CASE("MoE block with the auxiliary-loss-free bias alone (no balance loss)") {
  mt::ModelConfig cfg = testing::tiny_model();
  cfg.moe.aux_loss = mt::BalanceLoss::none;
  check_block(1, cfg);
}

namespace {

// dx and every parameter gradient of one block for the objective sum(y * r) + aux.
std::pair<std::vector<float>, std::vector<float>> block_grads(const mt::ModelConfig& cfg, int index,
                                                              mt::GemmPrecision inputs, const mt::Fp8Recipe* recipe) {
  const int batch = 2, rows = batch * cfg.seq_len, D = cfg.d_model;
  testing::StrictDevice dev;
  mt::ParamStore params;
  mt::LayerEnv env{&dev.be, inputs, &params, {}, recipe};
  mt::Block block(env, cfg, "blocks." + std::to_string(index), index >= cfg.n_dense_layers, 1);
  params.finalize(dev.be, 9, cfg.init_std);
  const mt::Buffer x = dev.upload(testing::random_floats(size_t(rows) * D, 21));
  const mt::Buffer r = dev.upload(testing::random_floats(size_t(rows) * D, 22));
  const mt::Buffer y = dev.floats(x.count()), dx = dev.floats(x.count());
  mt::Arena arena(dev.be);
  block.forward(0, arena, arena, arena, x.f32(), batch, y.f32(), 1.0f, nullptr);
  block.backward_input(0, arena, r.f32(), dx.f32());
  block.backward_weight(0);
  return {dx.to_host_f32(), params.host_grads()};
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

// E4M3 keeps 3 fraction bits (rounding error up to 1/16 relative) in each of a GEMM's two operands,
// E5M2 2 bits, and a block chains several GEMMs in forward and backward. Measured on the tiny
// model (relative L2 norm against fp32): attention and dense blocks 5-14% for dx and 8-10% for the
// weight gradients; the MoE block about 28%, because quantizing the attention before it moves the
// router's scores enough to change some tokens' experts, which changes their gradients wholesale.
// The bounds below leave a margin over those figures and fail if a GEMM loses its scaling or an
// operand its quantization.
TEST_CASE("fp8 mode: every block kind's gradients stay close to the fp32 gradients") {
  std::vector<std::pair<std::string, mt::ModelConfig>> kinds = testing::attention_variants();
  kinds.push_back({"moe", testing::tiny_model()});
  for (bool e5m2 : {false, true})
    for (auto& [name, cfg] : kinds) {
      const int index = name == "moe" ? 1 : 0;
      CAPTURE(name);
      CAPTURE(e5m2);
      mt::Fp8Recipe recipe;
      if (e5m2) recipe.gradient = mt::Fp8Format::e5m2;
      const auto [dx32, g32] = block_grads(cfg, index, mt::GemmPrecision::fp32, nullptr);
      const auto [dx8, g8] = block_grads(cfg, index, mt::GemmPrecision::fp8, &recipe);
      const double dx_error = relative_l2(dx8, dx32), grad_error = relative_l2(g8, g32);
      MESSAGE(name << (e5m2 ? " e5m2" : " e4m3") << ": dx " << dx_error << ", weight gradients " << grad_error);
      const double bound = name == "moe" ? 0.35 : 0.15;
      CHECK(dx_error > 1e-3);  // quantization happened
      CHECK(dx_error < bound);
      CHECK(grad_error < bound);
    }
}
