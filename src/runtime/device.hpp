#pragma once
// Chooses where the step runs from precision.device: "cpu", "cuda", "cpu-strict" (the CPU with
// device memory protected outside op calls), or "auto" (CUDA when a GPU is present, the CUDA
// op table can run the whole model and the step's estimated memory fits, else CPU).
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "ops/attention/cudnn_choice.hpp"
#include "ops/ops.hpp"

namespace mt {

struct DeviceChoice {
  Backend backend;
  std::string description;  // e.g. "cpu (OpenBLAS, 2 threads)"; why auto chose it
  enum class Owned { none, cuda, strict } owned = Owned::none;  // what release_device() frees
  double peak_tflops = 0;  // the device's dense BF16 peak when known (MFU's denominator), else 0
  int gpu = -1;            // the CUDA device index, when owned is cuda
  double host_estimate_bytes = 0;  // on the CPU: the pre-check's estimated peak of this rank's process
  AttentionImpl attention = AttentionImpl::automatic;  // precision.attention, for every stream's backend
};

// Another queue of the device for work that may overlap the first's (a model chunk's passes): on a
// GPU a backend of its own with its own CUDA stream; on the CPU, whose ops finish at the call, the
// backend itself. Ordering between queues is by marks (Backend::mark_record / mark_wait).
Backend open_stream(const DeviceChoice& d);
void close_stream(const DeviceChoice& d, Backend& stream);

// `slots`: micro-batches whose activations the model keeps at once (their memory counts).
DeviceChoice choose_device(const Config& cfg, int slots);
// Device memory the step needs: the planner's weights, gradients, moments and arenas (run_storage).
double estimated_step_bytes(const Config& cfg, int slots);
void release_device(DeviceChoice& d);

// A chosen device, released when it goes out of scope; a default one holds nothing to release.
struct Device {
  DeviceChoice choice;
  Device() = default;
  explicit Device(DeviceChoice c) : choice(std::move(c)) {}
  ~Device() { release_device(choice); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

// Streams opened on a device (open_stream), closed when they go out of scope. chunk[0] is the
// device's own backend, which the device releases.
struct Streams {
  const DeviceChoice* device = nullptr;
  std::vector<Backend> chunk, side;
  Streams() = default;
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
};

}  // namespace mt
