// The multi-token prediction modules (DeepSeek-V3 report, section 2.2): module k predicts the token k + 2
// ahead from the previous depth's hidden states and the embedding of the token k + 1 ahead, through its own
// block, and shares the embedding and the output head with the main model.
#include "model/head_loss.hpp"
#include "model/model.hpp"

namespace mt {

void Model::mtp_forward(int chunk, int slot, int k, const LossScales& scales, const LossSums& sums) {
  Saved& s = saved_[chunk][slot];
  Saved::Mtp& m = s.mtp[k];
  const MtpModule& mod = mtp[k];
  Arena& arena = arenas_[chunk][slot];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, T = cfg_.seq_len, rows = s.rows, shift = k + 1;
  const float eps = float(cfg_.norm_eps);
  m.h_prev = k == 0 ? s.top : s.mtp[k - 1].h;
  m.tokens = arena.ints(rows);
  int* targets = arena.ints(rows);
  be.shift_tokens({.rows = rows, .seq = T, .shift = shift, .tokens = s.inputs, .targets = s.targets,
                   .tokens_out = m.tokens, .targets_out = targets});
  const size_t n = size_t(rows) * D;
  m.emb = arena.floats(n);
  be.embedding_forward({.rows = rows, .dim = D, .tokens = m.tokens, .table = params.value(embedding), .out = m.emb});
  m.a = arena.floats(n);
  m.a_rstd = arena.floats(rows);
  m.b = arena.floats(n);
  m.b_rstd = arena.floats(rows);
  be.rmsnorm_forward({.rows = rows, .dim = D, .eps = eps, .x = m.h_prev, .weight = params.value(mod.hidden_norm),
                      .y = m.a, .rstd = m.a_rstd});
  be.rmsnorm_forward({.rows = rows, .dim = D, .eps = eps, .x = m.emb, .weight = params.value(mod.embed_norm),
                      .y = m.b, .rstd = m.b_rstd});
  m.cat = arena.floats(2 * n);
  be.copy_columns({.rows = rows, .cols = D, .src = m.a, .src_stride = D, .dst = m.cat, .dst_stride = 2 * D});
  be.copy_columns({.rows = rows, .cols = D, .src = m.b, .src_stride = D, .dst = m.cat + D, .dst_stride = 2 * D});
  m.hp = arena.floats(n);
  env.linear_forward(m.cat, env.weight(mod.proj), rows, 2 * D, D, m.hp);
  // The block holds this rank's rows under sequence parallelism; the out norm and head all of them.
  const ShardPlace& shard = env.shard;
  const size_t mine = size_t(shard.row_share(rows)) * D;
  float* h = arena.floats(mine);
  Arena& temp = scratch_[chunk];
  temp.reset();
  mod.block->forward(slot, arena, arena, temp, m.hp + size_t(shard.first_row(rows)) * D, s.rows / T, h, scales.aux,
                     sums.aux);
  m.h = env.gather_rows(arena, h, mine);
  m.n = arena.floats(n);
  m.n_rstd = arena.floats(rows);
  be.rmsnorm_forward({.rows = rows, .dim = D, .eps = eps, .x = m.h, .weight = params.value(mod.out_norm), .y = m.n,
                      .rstd = m.n_rstd});
  double* sum = sums.mtp ? sums.mtp + size_t(k) * sums.mtp_stride : nullptr;
  const double divisor = sums.mtp_divisor > 0 ? sums.mtp_divisor * double(T - shift) : 1.0;
  if (chunked_head()) {
    temp.reset();  // the block's temporaries are done with
    return head_in_chunks(chunk, slot,
                          {.rows = rows, .dim = D, .vocab = V, .chunk_rows = cfg_.head_chunk_tokens, .x = m.n,
                           .weight = head_env(chunk).weight(head), .targets = targets,
                           .grad_scale = scales.mtp / float(T - shift), .sum = sum, .divisor = divisor,
                           .losses = arena.floats(rows)},
                          {mod.out_norm, m.h, m.n_rstd}, &m.dn);
  }
  float* logits = arena.floats(size_t(rows) * V);
  head_env(chunk).linear_forward(m.n, head_env(chunk).weight(head), rows, D, V, logits);
  m.dlogits = logits;  // in place: nothing reads an MTP module's logits
  float* losses = arena.floats(rows);
  be.cross_entropy({.rows = rows, .vocab = V, .grad_scale = scales.mtp / float(T - shift), .logits = logits,
                    .targets = targets, .losses = losses, .dlogits = m.dlogits, .sum = sum, .divisor = divisor});
}

float* Model::mtp_backward_input(int chunk, int slot, int k, const float* dh_next) {
  Saved& s = saved_[chunk][slot];
  Saved::Mtp& m = s.mtp[k];
  const MtpModule& mod = mtp[k];
  Arena& arena = arenas_[chunk][slot];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, rows = s.rows;
  const size_t n = size_t(rows) * D;
  if (!s.head_done) {
    m.dn = arena.floats(n);
    head_env(chunk).linear_backward_input(m.dlogits, head_env(chunk).weight(head), rows, D, V, m.dn);
  }
  m.dh = arena.floats(n);
  be.rmsnorm_backward_input({.rows = rows, .dim = D, .dy = m.dn, .x = m.h, .weight = params.value(mod.out_norm),
                             .rstd = m.n_rstd, .dx = m.dh});
  if (dh_next) be.add({.n = n, .x = dh_next, .y = m.dh});
  const ShardPlace& shard = env.shard;
  const size_t mine = size_t(shard.row_share(rows)) * D;
  float* dhp = arena.floats(mine);
  mod.block->backward_input(slot, arena, m.dh + size_t(shard.first_row(rows)) * D, dhp);
  m.dhp = env.gather_rows(arena, dhp, mine);
  float* dcat = arena.floats(2 * n);
  env.linear_backward_input(m.dhp, env.weight(mod.proj), rows, 2 * D, D, dcat);
  m.da = arena.floats(n);
  m.db = arena.floats(n);
  be.copy_columns({.rows = rows, .cols = D, .src = dcat, .src_stride = 2 * D, .dst = m.da, .dst_stride = D});
  be.copy_columns({.rows = rows, .cols = D, .src = dcat + D, .src_stride = 2 * D, .dst = m.db, .dst_stride = D});
  m.demb = arena.floats(n);
  be.rmsnorm_backward_input({.rows = rows, .dim = D, .dy = m.db, .x = m.emb, .weight = params.value(mod.embed_norm),
                             .rstd = m.b_rstd, .dx = m.demb});
  float* dh_prev = arena.floats(n);
  be.rmsnorm_backward_input({.rows = rows, .dim = D, .dy = m.da, .x = m.h_prev, .weight = params.value(mod.hidden_norm),
                             .rstd = m.a_rstd, .dx = dh_prev});
  return dh_prev;
}

void Model::mtp_backward_weight(int chunk, int slot, int k) {
  Saved& s = saved_[chunk][slot];
  Saved::Mtp& m = s.mtp[k];
  const MtpModule& mod = mtp[k];
  const LayerEnv& env = chunk_env_[chunk];
  const Backend& be = env.be();
  const int D = cfg_.d_model, V = cfg_.vocab_size, rows = s.rows;
  if (!s.head_done)
    weigh(chunk, {head, mod.out_norm}, [&] {
      head_env(chunk).linear_backward_weight(m.dlogits, m.n, rows, D, V, params.grad(head));
      be.rmsnorm_backward_weight({.rows = rows, .dim = D, .dy = m.dn, .x = m.h, .rstd = m.n_rstd,
                                  .dweight = params.grad(mod.out_norm)});
    });
  weigh(chunk, mtp_group(k), [&] {
    mod.block->backward_weight(slot);
    env.linear_backward_weight(m.dhp, m.cat, rows, 2 * D, D, params.grad(mod.proj));
    be.rmsnorm_backward_weight({.rows = rows, .dim = D, .dy = m.da, .x = m.h_prev, .rstd = m.a_rstd,
                                .dweight = params.grad(mod.hidden_norm)});
    be.rmsnorm_backward_weight({.rows = rows, .dim = D, .dy = m.db, .x = m.emb, .rstd = m.b_rstd,
                                .dweight = params.grad(mod.embed_norm)});
  });
  weigh(chunk, {embedding}, [&] {
    be.embedding_backward(
        {.rows = rows, .dim = D, .tokens = m.tokens, .dout = m.demb, .dtable = params.grad(embedding)});
  });
}

}  // namespace mt
