#include "runtime/matmul_setup.hpp"

namespace mt {

Fp8Recipe fp8_recipe(const Fp8Config& c) {
  Fp8Recipe r;
  r.gradient = c.formats == Fp8Formats::e4m3_e5m2 ? Fp8Format::e5m2 : Fp8Format::e4m3;
  r.tile = c.tile;
  r.block = c.block;
  r.per_tensor = c.scaling == Fp8Scaling::tensor;
  r.pow2_scales = c.scale == Fp8Scale::pow2;
  r.accumulator_bits = c.accumulator_bits;
  r.promote_every = c.promote_every;
  return r;
}

MatmulSetup matmul_setup(const Config& cfg) {
  MatmulSetup m(gemm_inputs(cfg.precision));
  m.fp8 = fp8_recipe(cfg.fp8);
  m.fp8_head = cfg.fp8.head;
  m.fp8_router = cfg.fp8.router;
  m.fp8_fused_codes = cfg.fp8.fused_codes;
  m.bf16_activations = bf16_activations(cfg.precision);
  m.bf16_outputs = bf16_outputs(cfg.precision);
  return m;
}

}  // namespace mt
