#include "train/qk_clip.hpp"

#include <algorithm>

#include "model/mha.hpp"
#include "model/mla.hpp"

namespace mt {

QkClip::QkClip(Model& model, const QkClipConfig& cfg, const ParallelGroups& groups)
    : model_(model), cfg_(cfg), g_(groups) {
  const ModelConfig& m = model.config();
  layers_ = m.n_layers + m.mtp.depth;
  heads_ = m.n_heads / g_.layout.tp;
  held_.assign(size_t(layers_), false);
  const size_t n = size_t(layers_) * heads_;
  local_ = Buffer(be(), DType::f32, n);
  by_dp_ = Buffer(be(), DType::f32, n * g_.dp->size());
  all_ = Buffer(be(), DType::f32, by_dp_.count() * g_.mirror->size());
  for (int i = 0; i < m.n_layers; ++i)
    if (Block* b = model.block(i)) add_layer(b->attention(), i);
  for (size_t k = 0; k < model.mtp.size(); ++k) add_layer(model.mtp[k].block->attention(), m.n_layers + int(k));
}

QkClip::~QkClip() {
  for (int i = 0; i < model_.config().n_layers; ++i)
    if (Block* b = model_.block(i)) b->attention().set_max_logit(nullptr);
  for (auto& k : model_.mtp) k.block->attention().set_max_logit(nullptr);
}

void QkClip::add_layer(AttentionLayer& attn, int layer) {
  held_[size_t(layer)] = true;
  attn.set_max_logit(local_.f32() + size_t(layer) * heads_);
  const ModelConfig& m = model_.config();
  if (auto* mla = dynamic_cast<Mla*>(&attn)) {
    const int nope = m.attention.qk_nope_head_dim, qk = nope + m.attention.qk_rope_head_dim;
    const int wq = mla->wq_b >= 0 ? mla->wq_b : mla->wq;
    rows_.push_back({wq, layer, qk, 0, nope, 0.5f});
    rows_.push_back({wq, layer, qk, nope, qk, 1.0f});
    rows_.push_back({mla->wkv_b, layer, nope + m.attention.v_head_dim, 0, nope, 0.5f});
    return;
  }
  auto& mha = dynamic_cast<Mha&>(attn);
  const int kv_heads = m.attention.n_kv_heads == 0 ? m.n_heads : m.attention.n_kv_heads;
  if (kv_heads < m.n_heads) {
    rows_.push_back({mha.wq, layer, m.head_dim, 0, m.head_dim, 1.0f});
    return;
  }
  rows_.push_back({mha.wq, layer, m.head_dim, 0, m.head_dim, 0.5f});
  rows_.push_back({mha.wk, layer, m.head_dim, 0, m.head_dim, 0.5f});
}

void QkClip::queue() {
  const size_t n = local_.count();
  if (g_.dp->size() > 1) {
    g_.dev.dp->all_gather(device_span(local_), device_span(by_dp_));
  } else {
    be().copy_columns({.rows = 1, .cols = int(n), .src = local_.f32(), .src_stride = int(n), .dst = by_dp_.f32(),
                       .dst_stride = int(n)});
  }
  if (g_.mirror->size() > 1) {
    g_.dev.mirror->all_gather(device_span(by_dp_), device_span(all_));
  } else {
    be().copy_columns({.rows = 1, .cols = int(by_dp_.count()), .src = by_dp_.f32(),
                       .src_stride = int(by_dp_.count()), .dst = all_.f32(), .dst_stride = int(by_dp_.count())});
  }
  const int copies = int(all_.count() / n);
  for (const Rows& r : rows_) {
    const ParamInfo& info = model_.params.info(r.param);
    be().qk_clip_rows({.w = model_.params.value(r.param), .heads = heads_, .head_rows = r.head_rows,
                       .cols = int(info.shape[1]), .begin = r.begin, .end = r.end, .power = r.power,
                       .tau = float(cfg_.tau), .max_logit = all_.f32() + size_t(r.layer) * heads_, .copies = copies,
                       .stride = int(n)});
  }
  // The GEMMs' bfloat16 copies and FP8 codes, made by the step, follow the rescaled rows.
  if (!rows_.empty()) model_.params.values_updated();
  local_.zero();
}

std::vector<float> QkClip::head_maxima() const {
  const std::vector<float> all = all_.to_host_f32();
  const size_t n = local_.count();
  std::vector<float> out(all.begin(), all.begin() + long(n));
  for (size_t c = 1; c < all.size() / n; ++c)
    for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], all[c * n + i]);
  return out;
}

void QkClip::record(std::vector<float>& max_logit, std::vector<float>& clipped_heads) const {
  const std::vector<float> heads = head_maxima();
  const size_t L = size_t(layers_);
  std::vector<float> rows(2 * L, 0.0f);
  // One of a DualPipe pair speaks for the layers both hold.
  if (g_.mirror->rank() == 0)
    for (size_t l = 0; l < L; ++l) {
      if (!held_[l]) continue;
      for (int h = 0; h < heads_; ++h) {
        const float s = heads[l * heads_ + size_t(h)];
        rows[l] = std::max(rows[l], s);
        if (s > float(cfg_.tau)) rows[L + l] += 1;
      }
    }
  // The tensor-parallel ranks hold a layer's other heads: the largest of theirs, the sum of the counts.
  std::vector<float> by_tp(rows.size() * size_t(g_.tp->size()));
  g_.tp->all_gather(rows, by_tp);
  rows.assign(by_tp.begin(), by_tp.begin() + long(2 * L));
  for (size_t r = 1; r < size_t(g_.tp->size()); ++r)
    for (size_t l = 0; l < L; ++l) {
      rows[l] = std::max(rows[l], by_tp[r * 2 * L + l]);
      rows[L + l] += by_tp[r * 2 * L + L + l];
    }
  // Each layer is held by one pipeline rank (of a pair, the first): the others add zeros.
  g_.pp->all_reduce_sum(rows);
  max_logit.assign(rows.begin(), rows.begin() + long(L));
  clipped_heads.assign(rows.begin() + long(L), rows.end());
}

}  // namespace mt
