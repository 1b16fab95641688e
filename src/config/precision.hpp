#pragma once
// What the [precision] section implies beyond its own keys, for every layer that reads it.
#include "config/config.hpp"

namespace mt {

// Whether the run keeps what only GEMMs read in bfloat16: precision.bf16_activations, under bf16 GEMMs.
inline bool bf16_activations(const PrecisionConfig& p) {
  return p.bf16_activations && p.matmul == MatmulPrecision::bf16;
}

}  // namespace mt
