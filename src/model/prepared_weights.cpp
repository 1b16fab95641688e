#include "model/prepared_weights.hpp"

#include "model/params.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

// A weight's stored matrices: [groups, rows, cols] (routed experts) or [rows, cols].
struct Matrices {
  int groups = 1, rows = 0, cols = 0;
};
Matrices matrices_of(const ParamInfo& p) {
  MT_CHECK(p.shape.size() == 2 || p.shape.size() == 3);
  const size_t r = p.shape.size();
  return {r == 3 ? int(p.shape[0]) : 1, int(p.shape[r - 2]), int(p.shape[r - 1])};
}

bool same_weight_recipe(const Fp8Recipe& a, const Fp8Recipe& b) {
  return a.forward == b.forward && a.block == b.block && a.per_tensor == b.per_tensor &&
         a.pow2_scales == b.pow2_scales;
}

}  // namespace

PreparedWeights::Copy* PreparedWeights::want(int id, Form form) {
  if (size_t(id) >= index_.size()) index_.resize(size_t(id) + 1, {-1, -1, -1});
  int& at = index_[size_t(id)][size_t(form)];
  if (at < 0) {
    at = int(copies_.size());
    copies_.push_back({id, form, {}, {}, {}, false});
  }
  return &copies_[size_t(at)];
}

const Bf16* PreparedWeights::bf16(int id) {
  const Copy* c = want(id, Form::bf16);
  return c->made ? static_cast<const Bf16*>(c->codes.raw()) : nullptr;
}

Fp8Codes PreparedWeights::fp8(int id, bool dgrad, const Fp8Recipe& recipe) {
  if (!have_recipe_) recipe_ = recipe, have_recipe_ = true;
  if (!same_weight_recipe(recipe_, recipe)) return {};
  const Copy* c = want(id, dgrad ? Form::fp8_dgrad : Form::fp8_forward);
  if (!c->made) return {};
  return c->fp8;
}

void PreparedWeights::refresh(const ParamStore& params) {
  for (Copy& c : copies_) {
    if (params.info(c.id).value_released) c.made = false;  // ZeRO-3 lends its values only to passes
    else make(params, c);
  }
}

void PreparedWeights::make(const ParamStore& params, Copy& c) const {
  const ParamInfo& p = params.info(c.id);
  const Matrices m = matrices_of(p);
  const Backend& be = params.backend();
  if (c.form == Form::bf16) {
    if (!c.made) c.codes = Buffer(be, DType::u8, p.numel * sizeof(Bf16), Unfilled{});
    const int rows = int(p.numel / size_t(m.cols));
    be.copy_columns({.rows = rows, .cols = m.cols, .src = params.value(c.id), .src_stride = m.cols,
                     .dst_stride = m.cols, .dst_bf16 = static_cast<Bf16*>(c.codes.raw())});
  } else {
    const bool dgrad = c.form == Form::fp8_dgrad;
    const Fp8WeightLayout l = fp8_weight_layout(recipe_, m.rows, m.cols, dgrad);
    if (!c.made) {
      c.codes = Buffer(be, DType::u8, size_t(m.groups) * l.codes(), Unfilled{});
      c.scales = Buffer(be, DType::f32, size_t(m.groups) * l.pieces(), Unfilled{});
    }
    auto* codes = static_cast<uint8_t*>(c.codes.raw());
    be.fp8_quantize_weight({.recipe = &recipe_, .x = params.value(c.id), .groups = m.groups, .rows = m.rows,
                            .cols = m.cols, .transposed = dgrad, .codes = codes, .scales = c.scales.f32()});
    c.fp8 = {codes, c.scales.f32(), l.k_pad, dgrad, l.codes(), l.pieces()};
  }
  c.made = true;
}

size_t PreparedWeights::bytes() const {
  size_t n = 0;
  for (const Copy& c : copies_) n += c.codes.bytes() + c.scales.bytes();
  return n;
}

}  // namespace mt
