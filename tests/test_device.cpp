// Device choice: known GPU peaks for MFU, the memory estimate behind `auto`, and the CPU choices.
#include <doctest/doctest.h>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "test_helpers.hpp"
#include "train/device.hpp"

TEST_CASE("the dense BF16 peak is known for SXM Hopper GPUs only") {
  CHECK(mt::known_bf16_peak_tflops("NVIDIA H100 80GB HBM3") == 989.4);
  CHECK(mt::known_bf16_peak_tflops("NVIDIA H200") == 989.4);
  CHECK(mt::known_bf16_peak_tflops("NVIDIA H800") == 989.4);
  CHECK(mt::known_bf16_peak_tflops("NVIDIA H100 PCIe") == 0);
  CHECK(mt::known_bf16_peak_tflops("NVIDIA A100-SXM4-80GB") == 0);
}

TEST_CASE("the step's memory estimate: weights, gradients and moments, plus activations per slot") {
  const mt::Config cfg = mt::load_config("configs/deepseek-v3.toml");
  const double one = mt::estimated_step_bytes(cfg, 1), two = mt::estimated_step_bytes(cfg, 2);
  CHECK(one > 16.0 * mt::total_params(cfg.model));
  CHECK(two > one);
  CHECK(two - one == doctest::Approx(one - 16.0 * mt::total_params(cfg.model)));  // linear in the slots
  // DeepSeek-V3 needs terabytes: no single GPU fits it, so auto would stay on the CPU.
  CHECK(one > 10e12);
}

TEST_CASE("cpu and cpu-strict are chosen as asked and say so") {
  for (const char* device : {"cpu", "cpu-strict"}) {
    mt::Config cfg = mt::parse_config("", "test.toml", {std::string("precision.device=") + device});
    mt::DeviceChoice d = mt::choose_device(cfg, 1);
    CHECK(testing::contains(d.description, device));
    CHECK(std::string(d.backend.ops->name) == device);
    CHECK(d.peak_tflops == 0);
    mt::release_device(d);
  }
}
