// HBM bytes per quantized value of each FP8 recipe.
#include "plan/fp8_recipe.hpp"

namespace mt::plan {

bool parse_fp8_recipe(const std::string& name, Fp8Recipe& out) {
  for (Fp8Recipe r : {Fp8Recipe::tensor, Fp8Recipe::blockwise, Fp8Recipe::mxfp8})
    if (name == fp8_recipe_name(r)) return out = r, true;
  return false;
}

const char* fp8_recipe_name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::blockwise: return "blockwise";
    case Fp8Recipe::mxfp8: return "mxfp8";
    default: return "tensor";
  }
}

double quantization_bytes(Fp8Recipe r) {
  constexpr double bf16_read = 2, fp8_code = 1;
  const double scale_per_value = r == Fp8Recipe::blockwise ? 4.0 / 128 : r == Fp8Recipe::mxfp8 ? 1.0 / 32 : 0.0;
  return bf16_read + 2 * (fp8_code + scale_per_value);
}

}  // namespace mt::plan
