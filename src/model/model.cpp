#include "model/model.hpp"

#include <algorithm>

#include "model/head_loss.hpp"
#include "util/error.hpp"

namespace mt {

Model::Model(const ModelConfig& cfg, uint64_t seed, const Backend& backend, const MatmulSetup& matmul,
             int max_in_flight, const ShardPlace& shard, std::vector<StageSpec> chunks)
    : cfg_(cfg), matmul_(matmul),
      env_{.backend = &backend, .gemm_inputs = matmul.inputs, .params = &params, .shard = shard, .fp8 = &matmul_.fp8,
           .fp8_router = matmul.fp8_router, .bf16_activations = matmul.bf16_activations,
           .bf16_outputs = matmul.bf16_outputs, .fp8_fused_codes = matmul.fp8_fused_codes},
      chunks_(std::move(chunks)) {
  using I = ParamStore::Init;
  MT_CHECK(!matmul.bf16_activations || matmul.inputs == GemmPrecision::bf16);  // bfloat16 storage needs bf16 GEMMs
  MT_CHECK(!matmul.bf16_outputs || matmul.bf16_activations);
  if (chunks_.empty()) chunks_.push_back({0, cfg.n_layers, true, true});
  const int64_t V = cfg.vocab_size, D = cfg.d_model;
  arenas_.resize(chunks_.size());
  saved_.resize(chunks_.size());
  blocks_.resize(cfg.n_layers);
  block_ids_.resize(size_t(cfg.n_layers));
  bool first = false, last = false;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    LayerEnv env = env_;
    if (chunks_[c].tp) env.shard.tp = chunks_[c].tp;
    if (chunks_[c].ep) env.shard.ep = chunks_[c].ep;
    if (chunks_[c].backend) env.backend = chunks_[c].backend;
    env.side = chunks_[c].side;
    chunk_env_.push_back(env);
    for (int i = 0; i < max_in_flight; ++i) arenas_[c].emplace_back(env.be());
    own_sums_.emplace_back(env.be(), DType::f64, size_t(2 + cfg.mtp.depth));
    scratch_.emplace_back(env.be());
    saved_[c].resize(max_in_flight);
    first = first || chunks_[c].first;
    last = last || chunks_[c].last;
  }
  // The embedding's first copy lives with the first stage; MTP's copy on a last stage elsewhere
  // sums its gradient with it.
  if (first || (last && cfg.mtp.depth > 0)) {
    embedding = params.add("embedding", {V, D}, I::normal, true);
    params.infos[embedding].pipeline_copy = !first;
  }
  LayerEnv last_env = env_;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const LayerEnv& env = chunk_env_[c];
    if (chunks_[c].last) last_env = env;
    for (int i = chunks_[c].first_block; i < chunks_[c].end_block; ++i) {
      const int before = int(params.infos.size());
      blocks_[i] =
          std::make_unique<Block>(env, cfg, "blocks." + std::to_string(i), i >= cfg.n_dense_layers, max_in_flight);
      for (int id = before; id < int(params.infos.size()); ++id) block_ids_[size_t(i)].push_back(id);
    }
  }
  if (last) {
    final_norm = params.add("final_norm", {D}, I::ones, false);
    head = params.add("head", {V, D}, I::normal, true);
    for (int k = 0; k < cfg.mtp.depth; ++k) {
      const std::string prefix = "mtp." + std::to_string(k);
      const int before = int(params.infos.size());
      MtpModule m;
      m.hidden_norm = params.add(prefix + ".hidden_norm", {D}, I::ones, false);
      m.embed_norm = params.add(prefix + ".embed_norm", {D}, I::ones, false);
      m.proj = params.add(prefix + ".proj", {D, 2 * D}, I::normal, true);
      // The MTP block has the kind of the model's deeper blocks: MoE if there are any.
      m.block =
          std::make_unique<Block>(last_env, cfg, prefix + ".block", cfg.n_layers > cfg.n_dense_layers, max_in_flight);
      m.out_norm = params.add(prefix + ".out_norm", {D}, I::ones, false);
      std::vector<int>& rest = mtp_rest_ids_.emplace_back();
      std::vector<int>& read = mtp_read_ids_.emplace_back(std::vector<int>{head, embedding});
      for (int id = before; id < int(params.infos.size()); ++id) {
        if (id != m.out_norm) rest.push_back(id);
        read.push_back(id);
      }
      mtp.push_back(std::move(m));
    }
  }
  params.finalize(backend, seed, cfg.init_std);
}

std::vector<MoE*> Model::moe_layers() {
  std::vector<MoE*> out;
  for (auto& b : blocks_)
    if (b && b->moe()) out.push_back(b->moe());
  for (auto& m : mtp)
    if (m.block->moe()) out.push_back(m.block->moe());
  return out;
}

std::vector<int> Model::moe_layer_indices() const {
  std::vector<int> out;
  const int n_moe_blocks = cfg_.n_layers - cfg_.n_dense_layers;
  for (int i = cfg_.n_dense_layers; i < cfg_.n_layers; ++i)
    if (blocks_[i]) out.push_back(i - cfg_.n_dense_layers);
  if (n_moe_blocks > 0)
    for (size_t k = 0; k < mtp.size(); ++k) out.push_back(n_moe_blocks + int(k));
  return out;
}

std::vector<float> Model::to_host(const float* device, size_t n) const {
  std::vector<float> v(n);
  env_.be().download(v.data(), device, n * sizeof(float));
  return v;
}

std::vector<float> Model::logits_to_host(int slot) const {
  const Saved& s = saved_[0][slot];
  return to_host(s.logits, size_t(s.rows) * cfg_.vocab_size);
}

size_t Model::sum_over_arenas(size_t (Arena::*measure)() const) const {
  size_t total = 0;
  for (auto& chunk : arenas_)
    for (auto& a : chunk) total += (a.*measure)();
  for (auto& a : scratch_) total += (a.*measure)();
  return total;
}

size_t Model::arena_high_water() const { return sum_over_arenas(&Arena::high_water); }

size_t Model::arena_bytes() const { return sum_over_arenas(&Arena::capacity); }

LossSums Model::own_sums(int chunk) {
  const Buffer& b = own_sums_[size_t(chunk)];
  chunk_env_[chunk].be().zero(b.raw(), b.bytes());
  return {.ce = b.f64(), .aux = b.f64() + 1, .mtp = b.f64() + 2, .mtp_stride = 1};
}

void Model::read_own_sums(int chunk, ForwardResult& r) {
  const Buffer& b = own_sums_[size_t(chunk)];
  std::vector<double> v(b.count());
  chunk_env_[chunk].be().download(v.data(), b.raw(), b.bytes());
  r.ce_sum = v[0];
  r.aux_sum = v[1];
  r.mtp_ce_sums.assign(v.begin() + 2, v.end());
}

ForwardResult Model::forward(int chunk, int slot, const MicroBatch& mb, const float* input, const LossScales& scales,
                             const LossSums* sums) {
  if (!sums) {
    const LossSums own = own_sums(chunk);
    ForwardResult r = forward(chunk, slot, mb, input, scales, &own);
    read_own_sums(chunk, r);
    if (!chunks_[chunk].last) r.mtp_ce_sums.clear();
    return r;
  }
  const StageSpec& stage = chunks_[chunk];
  Saved& s = saved_[chunk][slot];
  Arena& arena = arenas_[chunk][slot];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, nb = stage.end_block - stage.first_block;
  const int rows = mb.batch * cfg_.seq_len, mine = env.shard.row_share(rows), first_row = env.shard.first_row(rows);
  const size_t n = size_t(mine) * D;  // what passes between blocks: this rank's rows
  s.rows = rows;
  // The caller's token buffers may be reused before backward_weight runs: keep a copy.
  int* inputs = arena.ints(rows);
  int* targets = arena.ints(rows);
  be.upload(inputs, mb.inputs, size_t(rows) * sizeof(int));
  be.upload(targets, mb.targets, size_t(rows) * sizeof(int));
  s.inputs = inputs;
  s.targets = targets;
  s.acts.assign(nb + 1, nullptr);
  ForwardResult r;

  s.acts[0] = arena.floats(n);
  if (stage.first)
    with_values(chunk, {embedding}, [&] {
      be.embedding_forward({.rows = mine, .dim = D, .tokens = s.inputs + first_row, .table = params.value(embedding),
                            .out = s.acts[0]});
    });
  else
    be.copy(s.acts[0], input, n * sizeof(float));
  s.aux_scale = scales.aux;
  for (int i = 0; i < nb; ++i) {
    s.acts[i + 1] = arena.floats(n);
    // A block's temporaries, and under recomputation what it drops, live only until the next block starts.
    Arena& scratch = scratch_[chunk];
    scratch.reset();
    Arena& kept = recompute_ == Recompute::full ? scratch : arena;
    Arena& redo = recompute_ == Recompute::none ? arena : scratch;
    with_values(chunk, block_group(stage.first_block + i), [&] {
      blocks_[stage.first_block + i]->forward(slot, kept, redo, scratch, s.acts[i], mb.batch, s.acts[i + 1], scales.aux,
                                              sums->aux);
    });
  }
  if (!stage.last) return r;
  // The head, the loss and MTP's projections see every row on every tensor-parallel rank.
  s.top = env.gather_rows(arena, s.acts[nb], n);
  const size_t whole = size_t(rows) * D;
  s.normed = arena.floats(whole);
  s.rstd = arena.floats(rows);
  s.head_done = chunked_head() && scales.backward;
  s.logits = s.dlogits = nullptr;
  if (s.head_done && shards_) shards_->open(chunk, forward_head_group());
  with_values(chunk, head_group(), [&] {
    be.rmsnorm_forward({.rows = rows, .dim = D, .eps = float(cfg_.norm_eps), .x = s.top,
                        .weight = params.value(final_norm), .y = s.normed, .rstd = s.rstd});
    if (chunked_head()) return head_chunks(chunk, slot, scales, sums->ce);
    s.logits = arena.floats(size_t(rows) * V);
    head_env(chunk).linear_forward(s.normed, head_env(chunk).weight(head), rows, D, V, s.logits);
  });
  if (!chunked_head()) {
    s.dlogits = keep_logits_ ? arena.floats(size_t(rows) * V) : s.logits;
    float* losses = arena.floats(rows);
    be.cross_entropy({.rows = rows, .vocab = V, .grad_scale = scales.ce, .logits = s.logits, .targets = s.targets,
                      .losses = losses, .dlogits = s.dlogits, .sum = sums->ce});
  }
  for (int i = 0; i < rows; ++i) r.tokens += mb.targets[i] >= 0;  // the host's own copy
  s.mtp.resize(mtp.size());
  for (size_t k = 0; k < mtp.size(); ++k)
    with_values(chunk, mtp_values(int(k)), [&] { mtp_forward(chunk, slot, int(k), scales, *sums); });
  if (!defer_forward_close_) close_forward_gradients(chunk);
  return r;
}

void Model::head_chunks(int chunk, int slot, const LossScales& scales, double* sum) {
  Saved& s = saved_[chunk][slot];
  Arena& arena = arenas_[chunk][slot];
  scratch_[chunk].reset();  // the last block's temporaries are done with
  const int V = cfg_.vocab_size;
  HeadLossArgs a{.rows = s.rows, .dim = cfg_.d_model, .vocab = V, .chunk_rows = cfg_.head_chunk_tokens,
                 .x = s.normed, .weight = head_env(chunk).weight(head), .targets = s.targets, .grad_scale = scales.ce,
                 .sum = sum, .losses = arena.floats(s.rows)};
  if (keep_logits_) a.logits = s.logits = arena.floats(size_t(s.rows) * V);
  head_in_chunks(chunk, slot, a, {final_norm, s.top, s.rstd}, &s.dnormed);
}

void Model::head_in_chunks(int chunk, int slot, const HeadLossArgs& args, const HeadNorm& norm, float** dx) {
  Arena& work = scratch_[chunk];
  HeadLossArgs a = args;
  if (!saved_[chunk][slot].head_done) return head_loss(head_env(chunk), work, a);
  // The forward opened forward_head_group for these gradients.
  a.dx = *dx = arenas_[chunk][slot].floats(size_t(a.rows) * a.dim);
  a.dweight = params.grad(head);
  head_loss(head_env(chunk), work, a);
  chunk_env_[chunk].be().rmsnorm_backward_weight(
      {.rows = a.rows, .dim = a.dim, .dy = *dx, .x = norm.x, .rstd = norm.rstd, .dweight = params.grad(norm.weight)});
}

void Model::backward_input(int chunk, int slot, const float* output_grad, bool weights_now) {
  const StageSpec& stage = chunks_[chunk];
  Saved& s = saved_[chunk][slot];
  Arena& arena = arenas_[chunk][slot];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, nb = stage.end_block - stage.first_block;
  const size_t n = size_t(env.shard.row_share(s.rows)) * D, whole = size_t(s.rows) * D;
  s.grads.assign(nb + 1, nullptr);
  if (stage.last) {
    // Every row's gradient (as every tensor-parallel rank computed the head's), then this rank's.
    float* top_grad = arena.floats(whole);
    if (!s.head_done) s.dnormed = arena.floats(whole);
    with_values(chunk, head_group(), [&] {
      if (!s.head_done)
        head_env(chunk).linear_backward_input(s.dlogits, head_env(chunk).weight(head), s.rows, D, V, s.dnormed);
      be.rmsnorm_backward_input({.rows = s.rows, .dim = D, .dy = s.dnormed, .x = s.top,
                                 .weight = params.value(final_norm), .rstd = s.rstd, .dx = top_grad});
    });
    // The MTP modules, deepest first, add their gradient w.r.t. the last block's output.
    const float* dh = nullptr;
    for (int k = int(mtp.size()) - 1; k >= 0; --k)
      with_values(chunk, mtp_values(k), [&] { dh = mtp_backward_input(chunk, slot, k, dh); });
    if (dh) be.add({.n = whole, .x = dh, .y = top_grad});
    s.grads[nb] = top_grad + size_t(env.shard.first_row(s.rows)) * D;
  } else {
    s.grads[nb] = arena.floats(n);
    be.copy(s.grads[nb], output_grad, n * sizeof(float));
  }
  s.blocks_weighted = weights_now || recompute_ != Recompute::none;
  // With each block's weight gradients taken at once, no block needs its output gradient after
  // its backward: the input gradients alternate between grads[nb] and one more buffer.
  float* other = s.blocks_weighted && nb > 0 ? arena.floats(n) : nullptr;
  // Under fp8 inputs a block's input gradient comes with its FP8 codes when the block below reads
  // them (Block::reads_output_codes); two rooms, used in turn, as the blocks' gradients are. None
  // under sequence parallelism: the blocks gather every rank's rows before their GEMMs.
  const int coded = env.shard.split_rows() ? 0 : s.rows;
  const Fp8Operand g = Fp8Operand::gradient;
  const Fp8RowCodes rooms[2] = {env.fp8_row_codes(arena, coded, D, g), env.fp8_row_codes(arena, coded, D, g)};
  for (int i = nb - 1; i >= 0; --i) {
    s.grads[i] = !s.blocks_weighted ? arena.floats(n) : (nb - i) % 2 ? other : s.grads[nb];
    Block& block = *blocks_[stage.first_block + i];
    const Fp8RowCodes& dy_codes = i + 1 < nb && block.reads_output_codes() ? rooms[(i + 1) % 2] : Fp8RowCodes{};
    const bool below_reads = i > 0 && blocks_[stage.first_block + i - 1]->reads_output_codes();
    const Fp8RowCodes& dx_codes = below_reads ? rooms[i % 2] : Fp8RowCodes{};
    with_values(chunk, block_group(stage.first_block + i), [&] {
      if (!s.blocks_weighted) {
        block.backward_input(slot, arena, s.grads[i + 1], s.grads[i], dy_codes, dx_codes);
        return;
      }
      Arena& work = scratch_[chunk];
      work.reset();
      if (recompute_ == Recompute::full)
        block.forward(slot, work, work, work, s.acts[i], s.rows / cfg_.seq_len, work.floats(n), s.aux_scale, nullptr,
                      true);
      else if (recompute_ == Recompute::selective)
        block.redo(slot, work);
      block.backward_input(slot, work, s.grads[i + 1], s.grads[i], dy_codes, dx_codes);
      // Before the next block reuses the scratch.
      weigh(chunk, block_group(stage.first_block + i), [&] { block.backward_weight(slot); });
    });
  }
}

void Model::backward_weight(int chunk, int slot) {
  const StageSpec& stage = chunks_[chunk];
  Saved& s = saved_[chunk][slot];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, nb = stage.end_block - stage.first_block;
  if (stage.last && !s.head_done)
    weigh(chunk, head_group(), [&] {
      head_env(chunk).linear_backward_weight(s.dlogits, s.normed, s.rows, D, V, params.grad(head));
      be.rmsnorm_backward_weight({.rows = s.rows, .dim = D, .dy = s.dnormed, .x = s.top, .rstd = s.rstd,
                                  .dweight = params.grad(final_norm)});
    });
  if (!s.blocks_weighted)
    for (int i = nb - 1; i >= 0; --i) {
      const int b = stage.first_block + i;
      weigh(chunk, block_group(b), [&] { blocks_[b]->backward_weight(slot); });
    }
  if (stage.last)
    for (size_t k = 0; k < mtp.size(); ++k) mtp_backward_weight(chunk, slot, int(k));
  if (stage.first) {
    // Every row's gradient, so that each tensor-parallel rank's copy of the embedding gets the whole sum.
    const float* dout = env.gather_rows(arenas_[chunk][slot], s.grads[0], size_t(env.shard.row_share(s.rows)) * D);
    weigh(chunk, {embedding}, [&] {
      be.embedding_backward(
          {.rows = s.rows, .dim = D, .tokens = s.inputs, .dout = dout, .dtable = params.grad(embedding)});
    });
  }
}

std::vector<std::vector<int>> Model::grad_groups(int chunk) const {
  const StageSpec& stage = chunks_[size_t(chunk)];
  std::vector<std::vector<int>> groups;
  if (stage.last) groups.push_back(chunked_head() ? forward_head_group() : head_group());
  for (int b = stage.first_block; b < stage.end_block; ++b) groups.push_back(block_group(b));
  for (size_t k = 0; stage.last && k < mtp.size(); ++k) {
    if (!chunked_head()) groups.push_back({head, mtp[k].out_norm});
    groups.push_back(mtp_group(int(k)));
    groups.push_back({embedding});
  }
  if (stage.first) groups.push_back({embedding});
  return groups;
}

std::vector<int> Model::forward_head_group() const {
  std::vector<int> ids = head_group();
  for (const MtpModule& m : mtp) ids.push_back(m.out_norm);
  return ids;
}

void Model::weigh(int chunk, const std::vector<int>& ids, const std::function<void()>& weights) {
  if (shards_) shards_->open(chunk, ids);
  weights();
  if (shards_) shards_->close(chunk);
}

void Model::with_values(int chunk, const std::vector<int>& ids, const std::function<void()>& pass) {
  if (shard_values_) shards_->gather(chunk, ids);
  pass();
  if (shard_values_) shards_->release(chunk);
}

std::vector<std::vector<int>> Model::value_groups(int chunk) const {
  const StageSpec& stage = chunks_[size_t(chunk)];
  std::vector<std::vector<int>> groups;
  if (stage.first) groups.push_back({embedding});
  for (int b = stage.first_block; b < stage.end_block; ++b) groups.push_back(block_group(b));
  if (stage.last) groups.push_back(head_group());
  for (size_t k = 0; stage.last && k < mtp.size(); ++k) groups.push_back(mtp_values(int(k)));
  return groups;
}

}  // namespace mt
