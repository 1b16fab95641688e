// The whole model's forward pass against the independent float64 reference, and every
// parameter gradient (backward_input through all layers, then backward_weight) against float64
// central finite differences of that reference.
#include <doctest/doctest.h>

#include <cmath>

#include "model/model.hpp"
#include "train/accumulate.hpp"
#include "naive_reference.hpp"
#include "test_helpers.hpp"

namespace {

// A global batch of 4 sequences in 2 micro-batches, run through the trainer's accumulation.
struct Case {
  mt::ModelConfig cfg;
  int batch = 4, micro_batch = 2;
  std::vector<int> inputs, targets;
  explicit Case(mt::ModelConfig c = testing::tiny_model()) : cfg(c) {
    inputs = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 11);
    targets = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 12);
  }
};

// Router biases that change which experts are selected, so the bias path is exercised.
void set_biases(mt::Model& model) {
  for (size_t i = 0; i < model.params.buffer_names.size(); ++i)
    model.params.set_buffer(int(i), testing::random_floats(model.params.buffer_size(int(i)), 100 + i, 0.3));
}

double run_model(mt::Model& model, const Case& c) {
  const int n = c.micro_batch * c.cfg.seq_len;
  mt::StepTotals t = mt::accumulate_gradients(model, c.batch, c.micro_batch,
      [&](int mb, std::vector<int>& in, std::vector<int>& tg) {
        in.assign(c.inputs.begin() + mb * n, c.inputs.begin() + (mb + 1) * n);
        tg.assign(c.targets.begin() + mb * n, c.targets.begin() + (mb + 1) * n);
      });
  return t.ce_sum / (c.batch * c.cfg.seq_len) + t.aux + c.cfg.mtp.weight * t.mtp;
}

}  // namespace

static void check_model(const mt::ModelConfig& cfg) {
  Case c(cfg);
  testing::StrictDevice dev;
  mt::Model model(c.cfg, 7, dev.be, mt::GemmPrecision::fp32, mt::slots_needed(c.cfg, c.batch, c.micro_batch));
  set_biases(model);
  const double loss = run_model(model, c);
  const std::vector<float> grads = model.params.host_grads();

  naive::Weights w = naive::from_store(model.params);
  auto reference = [&] { return naive::loss(w, c.cfg, c.inputs, c.targets, c.batch, c.micro_batch); };
  CHECK(loss == doctest::Approx(reference()).epsilon(1e-5));

  const double h = 1e-6;
  for (auto& info : model.params.infos) {
    CAPTURE(info.name);
    std::vector<double> fd(info.numel), an(info.numel);
    double max_abs = 0;
    for (size_t j = 0; j < info.numel; ++j) {
      double& v = w.p[info.name][j];
      const double keep = v;
      v = keep + h;
      const double up = reference();
      v = keep - h;
      const double down = reference();
      v = keep;
      fd[j] = (up - down) / (2 * h);
      an[j] = grads[info.offset + j];
      max_abs = std::max(max_abs, std::abs(fd[j]));
    }
    REQUIRE(max_abs > 0);  // every parameter must influence the loss
    for (size_t j = 0; j < info.numel; ++j) {
      CAPTURE(j);
      CHECK(std::abs(an[j] - fd[j]) <= 2e-4 * max_abs + 1e-7);
    }
  }
}

TEST_CASE("model forward equals the float64 reference and every gradient matches finite differences") {
  for (auto& [name, cfg] : testing::attention_variants()) {
    CAPTURE(name);
    check_model(cfg);
  }
}

TEST_CASE("every balance-loss grouping: loss and gradients match the reference") {
  for (mt::BalanceLoss kind : {mt::BalanceLoss::none, mt::BalanceLoss::micro_batch, mt::BalanceLoss::global_batch}) {
    CAPTURE(mt::name_of(kind));
    mt::ModelConfig cfg = testing::tiny_model();
    cfg.moe.aux_loss = kind;
    cfg.moe.aux_alpha = 0.5;  // large, so a wrong balance gradient cannot hide in the tolerance
    check_model(cfg);
  }
}

TEST_CASE("multi-token prediction (depth 2, sharing embedding and head): loss and gradients match the reference") {
  for (auto& [name, base] : testing::attention_variants()) {
    if (name != "mha" && name != "mla_q_lora") continue;
    CAPTURE(name);
    mt::ModelConfig cfg = base;
    cfg.mtp.depth = 2;
    cfg.mtp.weight = 0.7;
    check_model(cfg);
  }
  mt::ModelConfig dense = testing::tiny_model();  // a dense-only model gets dense MTP blocks
  dense.n_dense_layers = dense.n_layers;
  dense.mtp.depth = 1;
  check_model(dense);
}

TEST_CASE("micro-batches in flight together give the same gradients as one after another") {
  Case c;
  testing::StrictDevice dev;
  const mt::Backend& be = dev.be;
  // Two micro-batches: the second uses shifted tokens.
  std::vector<int> in2(c.inputs.rbegin(), c.inputs.rend()), tg2(c.targets.rbegin(), c.targets.rend());
  const float ce = 1.0f / (2 * c.batch * c.cfg.seq_len), aux = 1.0f / (2 * c.batch);  // 2 micro-batches of c.batch

  mt::Model seq_model(c.cfg, 3, be, mt::GemmPrecision::fp32, 1);
  for (auto* mb : {&c.inputs, &in2}) {
    const auto& tg = mb == &c.inputs ? c.targets : tg2;
    seq_model.forward(0, {mb->data(), tg.data(), c.batch}, {ce, aux});
    seq_model.backward_input(0);
    seq_model.backward_weight(0);
    seq_model.retire(0);
  }

  // Both forwards first, backward_input in reverse order, weight gradients last (zero-bubble style).
  mt::Model flight(c.cfg, 3, be, mt::GemmPrecision::fp32, 2);
  flight.forward(0, {c.inputs.data(), c.targets.data(), c.batch}, {ce, aux});
  flight.forward(1, {in2.data(), tg2.data(), c.batch}, {ce, aux});
  flight.backward_input(1);
  flight.backward_input(0);
  flight.backward_weight(0);
  flight.backward_weight(1);
  const std::vector<float> seq_grads = seq_model.params.host_grads(), flight_grads = flight.params.host_grads();
  for (size_t i = 0; i < seq_grads.size(); ++i) {
    CAPTURE(i);
    REQUIRE(flight_grads[i] == doctest::Approx(seq_grads[i]).epsilon(1e-5).scale(1e-6));
  }
}

TEST_CASE("initial weights depend only on seed, name and element index") {
  testing::StrictDevice dev;
  const mt::Backend& be = dev.be;
  mt::ModelConfig a = testing::tiny_model(), b = a;
  b.n_layers = 4;  // more blocks: the parameters both models share must be identical
  const mt::GemmPrecision fp32 = mt::GemmPrecision::fp32;
  mt::Model ma(a, 5, be, fp32, 1), mb(b, 5, be, fp32, 1), mc(a, 6, be, fp32, 1);
  const std::vector<float> va = ma.params.host_values(), vb = mb.params.host_values(), vc = mc.params.host_values();
  for (auto& info : ma.params.infos) {
    auto it = std::find_if(mb.params.infos.begin(), mb.params.infos.end(), [&](auto& x) { return x.name == info.name; });
    REQUIRE(it != mb.params.infos.end());
    CAPTURE(info.name);
    CHECK(std::equal(va.begin() + info.offset, va.begin() + info.offset + info.numel, vb.begin() + it->offset));
  }
  CHECK(va != vc);
}
