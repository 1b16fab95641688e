#include "train/device.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "model/flops.hpp"
#include "ops/cuda_backend.hpp"
#include "plan/cost_model.hpp"
#include "train/gpu_choice.hpp"
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

// MemAvailable of /proc/meminfo in bytes: what the kernel can give without swapping; 0 when not known.
double available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// A step that cannot fit in the host's memory is refused before anything is allocated, instead
// of being killed by the kernel part way. Each rank holds about 1/(tp*pp) of the model; ranks
// that share a host are not added up, so this catches what cannot fit even alone.
void check_host_memory(const Config& cfg, int slots) {
  const double available = available_host_bytes();
  const double needed = estimated_step_bytes(cfg, slots) / (double(cfg.parallel.tp) * cfg.parallel.pp);
  if (available <= 0 || needed <= available) return;
  const ModelConfig& m = cfg.model;
  char params[32];
  std::snprintf(params, sizeof params, "%.2f billion", total_params(m) / 1e9);
  throw UserError(cfg.source_path + ": a training step of this model needs about " + gib(needed) +
                  " of memory per rank (16 bytes per parameter for the weights, gradients and AdamW moments of " +
                  params + " parameters, plus activations), but " +
                  gib(available) + " is available (MemAvailable in /proc/meminfo): make the model smaller (model.d_model = " +
                  std::to_string(m.d_model) + ", model.n_layers = " + std::to_string(m.n_layers) +
                  "), lower training.micro_batch, or split it over more ranks (parallel.tp, parallel.pp)");
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
  const ModelConfig& m = cfg.model;
  // fp32 weights, gradients and the two AdamW moments.
  const double state = 16.0 * total_params(m);
  // The planner's BF16 figure for what forward saves, doubled for fp32 storage and doubled again
  // for what backward adds to the same arena until the micro-batch retires; the logits and their
  // gradient for the main head and each MTP depth.
  const double tokens = double(cfg.training.micro_batch) * m.seq_len;
  const double saved = 4.0 * plan::activation_bytes_per_token(m, plan::Layout{}) * tokens;
  const double logits = 2.0 * 4.0 * tokens * m.vocab_size * (1 + m.mtp.depth);
  return state + slots * (saved + logits);
}

DeviceChoice choose_device(const Config& cfg, int slots) {
  const DeviceKind want = cfg.precision.device;
  DeviceChoice d;
  if (want == DeviceKind::cpu || want == DeviceKind::cpu_strict) check_host_memory(cfg, slots);
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
  check_host_memory(cfg, slots);
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
