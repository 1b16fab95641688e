#pragma once
// The CPU reference's GEMM with FP8 inputs, which gemm() (cpu.cpp) hands its fp8 calls.
#include "ops/gemm/args.hpp"

namespace mt::cpu {

// The GemmArgs with inputs == fp8.
void gemm_fp8(const GemmArgs& g);

}  // namespace mt::cpu
