#include "runtime/gpu_peak.hpp"

namespace mt {

double known_bf16_peak_tflops(const std::string& gpu_name) {
  // NVIDIA's datasheets as tabulated in the scaling book and glennklockwood.com: 989.4 TFLOP/s dense
  // BF16 for the SXM H100, the H800 (the same tensor cores) and the H200. The PCIe H100 is slower.
  if (gpu_name.find("PCIe") != std::string::npos) return 0;
  for (const char* sxm : {"H100", "H800", "H200"})
    if (gpu_name.find(sxm) != std::string::npos) return 989.4;
  return 0;
}

}  // namespace mt
