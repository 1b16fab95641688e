#include "model/model.hpp"

#include <algorithm>

namespace mt {

Model::Model(const ModelConfig& cfg, uint64_t seed, const Backend& backend, GemmInputs gemm_inputs,
             int max_in_flight)
    : cfg_(cfg), env_{&backend, gemm_inputs, &params}, arenas_(max_in_flight), saved_(max_in_flight) {
  using I = ParamStore::Init;
  const int64_t V = cfg.vocab_size, D = cfg.d_model;
  embedding = params.add("embedding", {V, D}, I::normal, true);
  for (int i = 0; i < cfg.n_layers; ++i) blocks_.push_back(std::make_unique<Block>(env_, cfg, i, max_in_flight));
  final_norm = params.add("final_norm", {D}, I::ones, false);
  head = params.add("head", {V, D}, I::normal, true);
  params.finalize(seed, cfg.init_std);
}

std::vector<MoE*> Model::moe_layers() {
  std::vector<MoE*> out;
  for (auto& b : blocks_)
    if (b->moe()) out.push_back(b->moe());
  return out;
}

size_t Model::arena_bytes() const {
  size_t total = 0;
  for (auto& a : arenas_) total += a.capacity();
  return total;
}

ForwardResult Model::forward(int slot, const MicroBatch& mb, const LossScales& scales) {
  Saved& s = saved_[slot];
  Arena& arena = arenas_[slot];
  const Backend& be = env_.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, L = cfg_.n_layers;
  const int rows = mb.batch * cfg_.seq_len;
  const size_t n = size_t(rows) * D;
  s.rows = rows;
  // The caller's token buffers may be reused before backward_weight runs: keep a copy.
  int* inputs = arena.ints(rows);
  std::copy(mb.inputs, mb.inputs + rows, inputs);
  s.inputs = inputs;
  s.acts.assign(L + 1, nullptr);
  ForwardResult r;

  s.acts[0] = arena.floats(n);
  be.embedding_forward({.rows = rows, .dim = D, .tokens = s.inputs, .table = params.value(embedding), .out = s.acts[0]});
  for (int i = 0; i < L; ++i) {
    s.acts[i + 1] = arena.floats(n);
    r.aux_sum += blocks_[i]->forward(slot, arena, s.acts[i], mb.batch, s.acts[i + 1], scales.aux);
  }
  s.normed = arena.floats(n);
  s.rstd = arena.floats(rows);
  be.rmsnorm_forward({.rows = rows, .dim = D, .eps = float(cfg_.norm_eps), .x = s.acts[L],
                      .weight = params.value(final_norm), .y = s.normed, .rstd = s.rstd});
  float* logits = arena.floats(size_t(rows) * V);
  env_.linear_forward(s.normed, params.value(head), rows, D, V, logits);
  s.dlogits = arena.floats(size_t(rows) * V);
  float* losses = arena.floats(rows);
  r.ce_sum = be.cross_entropy({.rows = rows, .vocab = V, .grad_scale = scales.ce, .logits = logits,
                               .targets = mb.targets, .losses = losses, .dlogits = s.dlogits});
  for (int i = 0; i < rows; ++i) r.tokens += mb.targets[i] >= 0;
  return r;
}

void Model::backward_input(int slot) {
  Saved& s = saved_[slot];
  Arena& arena = arenas_[slot];
  const Backend& be = env_.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, L = cfg_.n_layers;
  const size_t n = size_t(s.rows) * D;
  s.grads.assign(L + 1, nullptr);
  s.dnormed = arena.floats(n);
  env_.linear_backward_input(s.dlogits, params.value(head), s.rows, D, V, s.dnormed);
  s.grads[L] = arena.floats(n);
  be.rmsnorm_backward_input({.rows = s.rows, .dim = D, .dy = s.dnormed, .x = s.acts[L],
                             .weight = params.value(final_norm), .rstd = s.rstd, .dx = s.grads[L]});
  for (int i = L - 1; i >= 0; --i) {
    s.grads[i] = arena.floats(n);
    blocks_[i]->backward_input(slot, arena, s.grads[i + 1], s.grads[i]);
  }
}

void Model::backward_weight(int slot) {
  Saved& s = saved_[slot];
  const Backend& be = env_.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, L = cfg_.n_layers;
  env_.linear_backward_weight(s.dlogits, s.normed, s.rows, D, V, params.grad(head));
  be.rmsnorm_backward_weight({.rows = s.rows, .dim = D, .dy = s.dnormed, .x = s.acts[L], .rstd = s.rstd,
                              .dweight = params.grad(final_norm)});
  for (int i = L - 1; i >= 0; --i) blocks_[i]->backward_weight(slot);
  be.embedding_backward({.rows = s.rows, .dim = D, .tokens = s.inputs, .dout = s.grads[0],
                         .dtable = params.grad(embedding)});
}

}  // namespace mt
