#pragma once
// Chooses where the step runs from precision.device: "cpu", "cuda", "cpu-strict" (the CPU with
// device memory protected outside op calls), or "auto" (CUDA when a GPU is present, the CUDA
// op table can run the whole model and the step's estimated memory fits, else CPU).
#include <string>

#include "config/config.hpp"
#include "model/layer_env.hpp"
#include "ops/ops.hpp"

namespace mt {

struct DeviceChoice {
  Backend backend;
  std::string description;  // e.g. "cpu (OpenBLAS, 2 threads)"; why auto chose it
  enum class Owned { none, cuda, strict } owned = Owned::none;  // what release_device() frees
  double peak_tflops = 0;  // the device's dense BF16 peak when known (MFU's denominator), else 0
  int gpu = -1;            // the CUDA device index, when owned is cuda
  double host_estimate_bytes = 0;  // on the CPU: the pre-check's estimated peak of this rank's process
};

// Another queue of the device for work that may overlap the first's (a model chunk's passes): on a
// GPU a backend of its own with its own CUDA stream; on the CPU, whose ops finish at the call, the
// backend itself. Ordering between queues is by marks (Backend::mark_record / mark_wait).
Backend open_stream(const DeviceChoice& d);
void close_stream(const DeviceChoice& d, Backend& stream);

// `slots`: micro-batches whose activations the model keeps at once (their memory counts).
DeviceChoice choose_device(const Config& cfg, int slots);
// Dense BF16 peak TFLOP/s of a GPU by its CUDA device name, 0 when not known.
double known_bf16_peak_tflops(const std::string& gpu_name);
// Device memory the step needs: the planner's weights, gradients, moments and arenas (run_storage).
double estimated_step_bytes(const Config& cfg, int slots);
// GEMM input precision from precision.matmul.
inline GemmPrecision gemm_inputs(const PrecisionConfig& p) {
  switch (p.matmul) {
    case MatmulPrecision::bf16: return GemmPrecision::bf16;
    case MatmulPrecision::fp8: return GemmPrecision::fp8;
    case MatmulPrecision::fp32: break;
  }
  return GemmPrecision::fp32;
}
// Whether the run keeps what only GEMMs read in bfloat16: precision.bf16_activations, under bf16 GEMMs.
inline bool bf16_activations(const PrecisionConfig& p) {
  return p.bf16_activations && p.matmul == MatmulPrecision::bf16;
}
// The op-level FP8 recipe of the [fp8] section.
Fp8Recipe fp8_recipe(const Fp8Config& c);
// The model's GEMM precision from precision.matmul and [fp8].
MatmulSetup matmul_setup(const Config& cfg);
void release_device(DeviceChoice& d);

}  // namespace mt
