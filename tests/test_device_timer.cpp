// DeviceTimer on the CPU backends: intervals in the op order, summed when read, started over after.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>

#include "ops/backend/device_timer.hpp"
#include "tensor/buffer.hpp"

namespace {

double seconds_of(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Some work for the backend: a square product of n x n buffers.
void products(const mt::Backend& be, int n, int times) {
  mt::Buffer a(be, mt::DType::f32, size_t(n) * n), c(be, mt::DType::f32, size_t(n) * n);
  mt::GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = a.f32(), g.b = a.f32(), g.c = c.f32();
  for (int i = 0; i < times; ++i) be.gemm(g);
}

void check_backend(const mt::Backend& be) {
  mt::DeviceTimer timer(be);
  CHECK(timer.take_seconds() == 0.0);  // nothing timed yet
  const auto t0 = std::chrono::steady_clock::now();
  timer.time([&] { products(be, 96, 4); });
  const double one = timer.take_seconds();
  const double window = seconds_of(t0);
  CHECK(one > 0);
  CHECK(one <= window);
  CHECK(timer.take_seconds() == 0.0);  // read: it starts over

  // Two intervals sum; the work between them is not counted.
  const auto t1 = std::chrono::steady_clock::now();
  timer.time([&] { products(be, 96, 2); });
  const auto gap0 = std::chrono::steady_clock::now();
  products(be, 160, 4);
  const double gap = seconds_of(gap0);
  timer.time([&] { products(be, 96, 2); });
  const double two = timer.take_seconds();
  CHECK(two > 0);
  CHECK(two <= seconds_of(t1) - gap);
}

}  // namespace

TEST_CASE("device timer: intervals of the CPU and strict backends, summed and started over") {
  check_backend(mt::cpu_backend());
  mt::Backend strict = mt::cpu_strict_backend_create();
  check_backend(strict);
  mt::cpu_strict_backend_destroy(strict);
}

TEST_CASE("device timer: intervals do not nest, and one that throws still ends") {
  mt::DeviceTimer timer(mt::cpu_backend());
  CHECK_THROWS_AS(timer.end(), std::logic_error);
  timer.begin();
  CHECK_THROWS_AS(timer.begin(), std::logic_error);
  timer.end();
  CHECK_THROWS_AS(timer.time([] { throw std::runtime_error("failed op"); }), std::runtime_error);
  timer.begin();  // the throwing interval was ended: a new one starts
  timer.end();
  CHECK(timer.take_seconds() >= 0);
}
