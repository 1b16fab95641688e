#pragma once
// The GPUs whose dense BF16 peak moetrain knows, for MFU's denominator when precision.peak_tflops
// is not set.
#include <string>

namespace mt {

// Dense BF16 peak TFLOP/s of a GPU by its CUDA device name, 0 when not known.
double known_bf16_peak_tflops(const std::string& gpu_name);

}  // namespace mt
