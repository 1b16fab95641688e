#pragma once
// What the [precision] section implies beyond its own keys, for every layer that reads it.
#include "config/config.hpp"

namespace mt {

// Whether the run keeps what only GEMMs read in bfloat16: precision.bf16_activations, under bf16 GEMMs.
inline bool bf16_activations(const PrecisionConfig& p) {
  return p.bf16_activations && p.matmul == MatmulPrecision::bf16;
}

// Whether GEMMs whose output only SwiGLU reads write it in bfloat16: precision.bf16_outputs, with
// bf16_activations (it rounds one more place, so it goes with the storage that keeps bfloat16).
inline bool bf16_outputs(const PrecisionConfig& p) { return p.bf16_outputs && bf16_activations(p); }

}  // namespace mt
