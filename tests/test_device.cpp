// Device choice: known GPU peaks for MFU, the memory estimate behind `auto`, the CPU choices, and
// which GPU each rank of a node takes.
#include <doctest/doctest.h>

#include <cstdlib>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "ops/ops.hpp"
#include "test_helpers.hpp"
#include "runtime/device.hpp"
#include "runtime/gpu_choice.hpp"
#include "runtime/gpu_peak.hpp"
#include "util/error.hpp"

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

TEST_CASE("each rank of a node gets the GPU of its node-local rank, or all of them a reason") {
  std::string why;
  CHECK(mt::gpu_for_rank({.local_rank = 0, .local_size = 1}, 1, false, &why) == 0);
  CHECK(mt::gpu_for_rank({.local_rank = 5, .local_size = 8}, 8, false, &why) == 5);
  CHECK(mt::gpu_for_rank({.local_rank = 1, .local_size = 2}, 4, false, &why) == 1);  // spare GPUs stay idle
  CHECK(why.empty());
  // Too few GPUs: even the ranks whose index exists get none, so the node agrees.
  CHECK(mt::gpu_for_rank({.local_rank = 0, .local_size = 8}, 2, false, &why) == -1);
  CHECK(testing::contains(why, "runs 8 ranks but has 2 visible GPU(s)"));
  CHECK(testing::contains(why, "parallel.share_gpu"));
  CHECK(mt::gpu_for_rank({.local_rank = 0, .local_size = 1}, 0, false, &why) == -1);
}

TEST_CASE("with parallel.share_gpu the ranks of a node take its GPUs in turn") {
  std::string why;
  CHECK(mt::gpu_for_rank({.local_rank = 0, .local_size = 4}, 1, true, &why) == 0);
  CHECK(mt::gpu_for_rank({.local_rank = 3, .local_size = 4}, 1, true, &why) == 0);
  CHECK(mt::gpu_for_rank({.local_rank = 3, .local_size = 4}, 2, true, &why) == 1);
  CHECK(mt::gpu_for_rank({.local_rank = 4, .local_size = 8}, 8, true, &why) == 4);  // enough: one each
  CHECK(why.empty());
  CHECK(mt::gpu_for_rank({.local_rank = 0, .local_size = 2}, 0, true, &why) == -1);  // none to share
}

TEST_CASE("the node place comes from OpenMPI's environment, alone on the node without it") {
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  mt::NodePlace alone = mt::node_place_from_env();
  CHECK(alone.local_rank == 0);
  CHECK(alone.local_size == 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  mt::NodePlace p = mt::node_place_from_env();
  CHECK(p.local_rank == 3);
  CHECK(p.local_size == 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);
  CHECK_THROWS_WITH_AS(mt::node_place_from_env(), doctest::Contains("OMPI_COMM_WORLD_LOCAL_RANK"), mt::UserError);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST_CASE("a host allocation the machine cannot make is an error naming its size, not a null buffer") {
  const mt::OpTable& cpu = mt::cpu_ops();
  const size_t impossible = size_t(1) << 62;
  const std::string size = std::to_string(impossible) + " bytes";
  CHECK_THROWS_WITH_AS(cpu.alloc(nullptr, impossible), doctest::Contains(size.c_str()), std::runtime_error);
  void* small = cpu.alloc(nullptr, 64);
  CHECK(small != nullptr);
  cpu.release(nullptr, small);
}
