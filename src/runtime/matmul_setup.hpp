#pragma once
// The model's GEMM precision as the op table takes it, from precision.matmul and the [fp8] section.
#include "config/config.hpp"
#include "config/precision.hpp"
#include "model/layer_env.hpp"
#include "ops/ops.hpp"

namespace mt {

// GEMM input precision from precision.matmul.
inline GemmInputs gemm_inputs(const PrecisionConfig& p) {
  switch (p.matmul) {
    case MatmulPrecision::bf16: return GemmInputs::bf16;
    case MatmulPrecision::fp8: return GemmInputs::fp8;
    case MatmulPrecision::fp32: break;
  }
  return GemmInputs::fp32;
}
// The op-level FP8 recipe of the [fp8] section.
Fp8Recipe fp8_recipe(const Fp8Config& c);
// The model's GEMM precision from precision.matmul and [fp8].
MatmulSetup matmul_setup(const Config& cfg);

}  // namespace mt
