#include "train/device.hpp"

#include <cstdio>

#include "ops/backend/cuda_backend.hpp"
#include "parallel/layout.hpp"
#include "train/gpu_choice.hpp"
#include "train/memory_estimate.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(size_t(1) << 30));
  return text;
}

}  // namespace

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
  m.bf16_activations = bf16_activations(cfg.precision);
  return m;
}

double known_bf16_peak_tflops(const std::string& gpu_name) {
  // NVIDIA's datasheets as tabulated in the scaling book and glennklockwood.com: 989.4 TFLOP/s dense
  // BF16 for the SXM H100, the H800 (the same tensor cores) and the H200. The PCIe H100 is slower.
  if (gpu_name.find("PCIe") != std::string::npos) return 0;
  for (const char* sxm : {"H100", "H800", "H200"})
    if (gpu_name.find(sxm) != std::string::npos) return 989.4;
  return 0;
}

double estimated_step_bytes(const Config& cfg, int slots) {
  const plan::Memory m = run_storage(cfg);
  return m.weights + m.grads + m.optimizer + (layout_of_config(cfg).scheduled() ? 1 : slots) * m.activations;
}

DeviceChoice choose_device(const Config& cfg, int slots) {
  const DeviceKind want = cfg.precision.device;
  DeviceChoice d;
  if (want == DeviceKind::cpu || want == DeviceKind::cpu_strict) d.host_estimate_bytes = check_host_memory(cfg, slots);
  if (want == DeviceKind::cpu) {
    d.backend = cpu_backend();
    d.description = "cpu";
    return d;
  }
  if (want == DeviceKind::cpu_strict) {
    d.backend = cpu_strict_backend_create();
    d.owned = DeviceChoice::Owned::strict;
    d.description = "cpu-strict (device memory unreadable outside op calls)";
    return d;
  }
  std::string why;
  bool usable = cuda_available(&why);
  const int gpu = usable ? gpu_for_rank(node_place_from_env(), cuda_device_count(), cfg.parallel.share_gpu, &why) : -1;
  if (usable && gpu < 0) {
    usable = false;
    const std::string n = std::to_string(cuda_device_count());
    why += "; start at most " + n + " ranks per node (a smaller mpirun -np, or --map-by ppr:" + n + ":node), or let them share with --set parallel.share_gpu=true";
  }
  if (usable) {
    const CudaDeviceInfo info = cuda_device_info(gpu);
    const double needed = estimated_step_bytes(cfg, slots);
    Backend probe = cuda_backend_create(gpu);
    const std::vector<std::string> missing = missing_ops(*probe.ops);
    const std::string memory = "the step needs about " + gib(needed) + ", " + gib(double(info.free_bytes)) + " free";
    const std::string name = "GPU " + std::to_string(gpu) + " (" + info.name + ")";
    // Explicitly asked for, the GPU is used even if the estimate says it is too small.
    if (missing.empty() && (want == DeviceKind::cuda || needed <= 0.9 * double(info.free_bytes))) {
      d.backend = probe;
      d.owned = DeviceChoice::Owned::cuda;
      d.gpu = gpu;
      d.peak_tflops = known_bf16_peak_tflops(info.name);
      d.description = "cuda:" + std::to_string(gpu) + " " + info.name + " (" +
                      (want == DeviceKind::cuda ? "precision.device = cuda" : "auto") + "; " + memory + ")";
      return d;
    }
    cuda_backend_destroy(probe);
    usable = false;
    why = missing.empty() ? name + " is too small: " + memory
                          : "the CUDA op table does not yet implement " + join(missing);
  }
  if (want == DeviceKind::cuda)
    throw UserError(cfg.origin.at("precision.device") + ": precision.device = \"cuda\" cannot be used: " + why +
                    "; set precision.device = \"cpu\" or \"auto\"");
  d.host_estimate_bytes = check_host_memory(cfg, slots);
  d.backend = cpu_backend();
  d.description = "cpu (auto: " + why + ")";
  return d;
}

Backend open_stream(const DeviceChoice& d) {
  switch (d.owned) {
    case DeviceChoice::Owned::cuda: return cuda_backend_create(d.gpu);
    case DeviceChoice::Owned::strict: return cpu_strict_stream_create(d.backend);
    case DeviceChoice::Owned::none: break;
  }
  return d.backend;
}

void close_stream(const DeviceChoice& d, Backend& stream) {
  if (d.owned == DeviceChoice::Owned::cuda) cuda_backend_destroy(stream);
  if (d.owned == DeviceChoice::Owned::strict) cpu_strict_stream_destroy(stream);
  stream = Backend{};
}

void release_device(DeviceChoice& d) {
  if (d.owned == DeviceChoice::Owned::cuda) cuda_backend_destroy(d.backend);
  if (d.owned == DeviceChoice::Owned::strict) cpu_strict_backend_destroy(d.backend);
  d.owned = DeviceChoice::Owned::none;
}

}  // namespace mt
