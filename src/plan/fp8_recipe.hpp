#pragma once
// The FP8 recipes the planner costs and the HBM bytes each moves to quantize one GEMM input or
// output gradient: a per-tensor scale (Megatron's current or delayed scaling: one scale per
// tensor, nothing per value), DeepSeek-V3's block-wise recipe (1x128 activation tiles with an
// FP32 scale; arXiv 2412.19437 §3.3.2) and MXFP8 (OCP Microscaling Formats v1.0: 32 values along
// the GEMM's reduction share one E8M0 power-of-two scale byte).
#include <string>

namespace mt::plan {

enum class Fp8Recipe { tensor, blockwise, mxfp8 };

// "tensor", "blockwise" or "mxfp8"; false for any other name.
bool parse_fp8_recipe(const std::string& name, Fp8Recipe& out);
const char* fp8_recipe_name(Fp8Recipe r);

// Reading the BF16 value (2 bytes) and writing both FP8 copies its GEMMs need (1 byte each:
// row-wise for its own GEMM, column-wise for the weight gradient's, whose blocks lie along the
// other dimension) with each copy's share of a scale. Block-wise and MXFP8 move the same bytes:
// 4 per 128 values or 1 per 32. Weights are quantized once per step, which the planner leaves out.
double quantization_bytes(Fp8Recipe r);

}  // namespace mt::plan
