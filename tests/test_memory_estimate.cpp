// The host memory pre-check's estimate (parallel/memory_estimate.hpp): which terms it counts and when,
// and the available memory it compares against. tests/inputs/memory_tests.sh checks it against the
// peak of real runs.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "runtime/device.hpp"
#include "parallel/memory_estimate.hpp"
#include "util/error.hpp"

namespace {

double term(const mt::HostMemoryEstimate& e, const std::string& starts) {
  for (const mt::MemoryTerm& t : e.terms)
    if (t.name.rfind(starts, 0) == 0) return t.bytes;
  return -1;
}

}  // namespace

TEST_CASE("the host estimate: the state of every parameter, the arenas, and the largest transient term") {
  const mt::Config cfg = mt::load_config("configs/tiny.toml");
  const mt::HostMemoryEstimate e = mt::estimate_host_memory(cfg, 1, 2e8, 5e6);
  const double params = mt::total_params(cfg.model);
  CHECK(term(e, "program") == 2e8);
  CHECK(term(e, "token shards") == 5e6);
  CHECK(term(e, "weights") == doctest::Approx(4 * params).epsilon(0.001));  // and the router biases
  CHECK(term(e, "gradients") == doctest::Approx(4 * params));
  CHECK(term(e, "AdamW moments") == doctest::Approx(8 * params));
  CHECK(term(e, "activation arenas") > 0);
  CHECK(term(e, "during a step") == -1);  // fp32 GEMMs round no copies
  // The checkpoint's export: weights, both moments, and the host copy of one moment it reads first.
  const double checkpoint = term(e, "at a checkpoint");
  CHECK(checkpoint == doctest::Approx(16 * params).epsilon(0.001));
  double lasting = 0;
  for (const mt::MemoryTerm& t : e.terms) lasting += t.transient ? 0 : t.bytes;
  CHECK(e.peak_bytes() == doctest::Approx(lasting + checkpoint));
  CHECK(e.needed_bytes() == doctest::Approx(1.1 * e.peak_bytes()));

  const mt::Config bf16 = mt::load_config("configs/tiny.toml", {"precision.matmul=\"bf16\"", "checkpoint.final=false",
                                                                        "checkpoint.every=400"});
  const mt::HostMemoryEstimate b = mt::estimate_host_memory(bf16, 1, 2e8, 5e6);
  // The larger GEMM's operands: the dense FFN's here (tokens x ffn_hidden), not the head's.
  const double tokens = 8.0 * 128, head = tokens * 257 + 257 * 128.0, ffn = tokens * 384 + 384 * 128.0;
  REQUIRE(ffn > head);
  CHECK(term(b, "during a step") == doctest::Approx(4 * ffn));
  CHECK(term(b, "at a checkpoint") == -1);  // no checkpoint is written
}

TEST_CASE("the host estimate grows with the micro-batch and the slots, and counts every rank on the host") {
  const mt::Config small = mt::load_config("configs/tiny.toml");
  const mt::Config large = mt::load_config("configs/tiny.toml", {"training.micro_batch=16"});
  const double arenas = term(mt::estimate_host_memory(small, 1, 0, 0), "activation arenas");
  const double doubled = term(mt::estimate_host_memory(large, 1, 0, 0), "activation arenas");
  CHECK(doubled == doctest::Approx(2 * arenas).epsilon(0.02));
  CHECK(term(mt::estimate_host_memory(small, 2, 0, 0), "activation arenas") == doctest::Approx(2 * arenas));
  const double one = mt::estimate_host_memory(small, 1, 2e8, 0).peak_bytes();
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  const double four = mt::estimate_host_memory(small, 1, 2e8, 0).peak_bytes();
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  CHECK(four == doctest::Approx(4 * one));
}

TEST_CASE("moe-1b's estimate is over the 24 GB host that killed it after its first step") {
  // The earlier estimate, 19.4 GB, let it start.
  const mt::Config cfg = mt::load_config("configs/moe-1b.toml");
  CHECK(mt::estimate_host_memory(cfg, 1, 1.7e8, 5e6).peak_bytes() > 24e9);
}

TEST_CASE("the available memory: MemAvailable, or MOETRAIN_MEMORY_AVAILABLE when set") {
  ::unsetenv("MOETRAIN_MEMORY_AVAILABLE");
  CHECK(mt::available_host_bytes() > 0);
  ::setenv("MOETRAIN_MEMORY_AVAILABLE", "3.5e9", 1);
  CHECK(mt::available_host_bytes() == 3.5e9);
  for (const char* bad : {"lots", "8GB", "-1", "0", ""}) {
    ::setenv("MOETRAIN_MEMORY_AVAILABLE", bad, 1);
    CHECK_THROWS_WITH_AS(mt::available_host_bytes(), doctest::Contains("expected the bytes this run may use"),
                         mt::UserError);
  }
  ::unsetenv("MOETRAIN_MEMORY_AVAILABLE");
}
