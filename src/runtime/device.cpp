#include "runtime/device.hpp"

#include <cstdio>

#include "ops/backend/cuda_backend.hpp"
#include "parallel/layout.hpp"
#include "parallel/memory_estimate.hpp"
#include "runtime/gpu_choice.hpp"
#include "runtime/gpu_peak.hpp"
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

AttentionImpl attention_impl(AttentionChoice c) {
  switch (c) {
    case AttentionChoice::automatic: return AttentionImpl::automatic;
    case AttentionChoice::cudnn: return AttentionImpl::cudnn;
    case AttentionChoice::own: return AttentionImpl::own;
  }
  return AttentionImpl::automatic;
}

}  // namespace

double estimated_step_bytes(const Config& cfg, int slots) {
  const RankMemory m = run_storage(cfg);
  const int arenas = layout_of_config(cfg).scheduled() ? 1 : slots;
  return m.weights + m.grads + m.optimizer + m.prepared + arenas * m.activations;
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
    why += "; start at most " + n + " ranks per node (a smaller mpirun -np, or --map-by ppr:" + n +
           ":node), or let them share with --set parallel.share_gpu=true";
  }
  if (usable) {
    const CudaDeviceInfo info = cuda_device_info(gpu);
    const double needed = estimated_step_bytes(cfg, slots);
    d.attention = attention_impl(cfg.precision.attention);
    Backend probe = cuda_backend_create(gpu, {.attention = d.attention});
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
                      (want == DeviceKind::cuda ? "precision.device = cuda" : "auto") + "; " + memory +
                      "); attention: " +
                      (cfg.precision.matmul == MatmulPrecision::fp32 ? "own kernels (fp32 products)"
                                                                     : cuda_attention_note(probe));
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

// A stream counts on its device's counters and joins its graphs.
Backend open_stream(const DeviceChoice& d) {
  Backend s = d.backend;
  switch (d.owned) {
    case DeviceChoice::Owned::cuda: s = cuda_backend_create(d.gpu, {.attention = d.attention}); break;
    case DeviceChoice::Owned::strict: s = cpu_strict_stream_create(d.backend); break;
    case DeviceChoice::Owned::none: break;
  }
  s.counters = d.backend.counters;
  s.graph = d.backend.graph;
  return s;
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

Streams::~Streams() {
  for (size_t c = 1; c < chunk.size(); ++c) close_stream(*device, chunk[c]);
  for (Backend& s : side) close_stream(*device, s);
}

}  // namespace mt
