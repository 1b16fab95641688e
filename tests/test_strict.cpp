// The strict CPU backend: device memory is readable by its ops and by upload/download, and by
// nothing else. Each check that expects a crash runs in a forked child.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>

#include "ops/backend/mark.hpp"
#include "test_helpers.hpp"

namespace {

// Runs `body` in a child process; returns the signal that ended it, or 0 if it exited normally.
// The child drops the test framework's crash handler, so a crash ends it quietly.
int death_signal(const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

}  // namespace

TEST_CASE("strict backend: a host read of a device buffer dies; upload, ops and download work") {
  testing::StrictDevice dev;
  const mt::Buffer x = dev.upload({1.0f, 2.0f, 3.0f});
  volatile float sink = 0;
  CHECK(death_signal([&] { sink = x.f32()[0]; }) == SIGSEGV);
  CHECK(death_signal([&] { x.f32()[1] = 5.0f; }) == SIGSEGV);
  // An op opens the memory for its own duration only.
  dev.be.scale({.n = 3, .factor = 2.0f, .x = x.f32()});
  CHECK(x.to_host_f32() == std::vector<float>{2.0f, 4.0f, 6.0f});
  CHECK(death_signal([&] { sink = x.f32()[2]; }) == SIGSEGV);
  // The same read through download is fine.
  CHECK(death_signal([&] { sink = x.to_host_f32()[2]; }) == 0);
  (void)sink;
}

TEST_CASE("strict backend: freed blocks are reused, and buffers of any size stay separate") {
  testing::StrictDevice dev;
  std::vector<mt::Buffer> keep;
  for (size_t n : {1, 1000, 5000, 3}) keep.push_back(dev.upload(std::vector<float>(n, float(n))));
  {
    const mt::Buffer gone = dev.floats(100000);
  }
  const mt::Buffer again = dev.upload(std::vector<float>(50000, 7.0f));  // fits where `gone` was
  for (const mt::Buffer& b : keep) CHECK(b.to_host_f32() == std::vector<float>(b.count(), float(b.count())));
  CHECK(again.to_host_f32() == std::vector<float>(50000, 7.0f));
  const mt::Buffer zero = dev.floats(10);
  CHECK(zero.to_host_f32() == std::vector<float>(10, 0.0f));
}

TEST_CASE("strict streams: a stream sees another's queued write only after waiting on its mark") {
  mt::Backend a = mt::cpu_strict_backend_create();
  mt::Backend b = mt::cpu_strict_stream_create(a);
  {
    mt::Buffer x(a, mt::DType::f32, 4), y(a, mt::DType::f32, 4), ones(a, mt::DType::f32, 4);
    x.from_host(std::vector<float>{1, 2, 3, 4});
    ones.from_host(std::vector<float>{1, 1, 1, 1});
    a.add({.n = 4, .x = ones.f32(), .y = x.f32()});  // queued on a: x becomes 2 3 4 5 when a runs
    std::vector<float> seen(4);
    b.copy(y.f32(), x.f32(), 16);  // no wait: b runs ahead of a
    b.download(seen.data(), y.f32(), 16);
    CHECK(seen == std::vector<float>{1, 2, 3, 4});
    mt::Mark::recorded(a).make_wait(b);
    b.copy(y.f32(), x.f32(), 16);
    b.download(seen.data(), y.f32(), 16);
    CHECK(seen == std::vector<float>{2, 3, 4, 5});
  }
  mt::cpu_strict_stream_destroy(b);
  mt::cpu_strict_backend_destroy(a);
}

TEST_CASE("strict streams: a forked stream that does not wait for its input reads it unwritten") {
  // The fork and join of a side stream (the MoE's shared experts): a writes x, b reads it into y,
  // a waits for b. Without the fork's wait b runs when a's wait is issued, ahead of a's queued add.
  for (bool fork : {true, false}) {
    CAPTURE(fork);
    mt::Backend a = mt::cpu_strict_backend_create();
    mt::Backend b = mt::cpu_strict_stream_create(a);
    {
      mt::Buffer x(a, mt::DType::f32, 2), y(a, mt::DType::f32, 2), ones(a, mt::DType::f32, 2);
      x.from_host(std::vector<float>{1, 2});
      ones.from_host(std::vector<float>{1, 1});
      a.add({.n = 2, .x = ones.f32(), .y = x.f32()});  // queued on a: x becomes 2 3
      if (fork) mt::order_after(b, a);
      b.copy(y.f32(), x.f32(), 8);
      mt::order_after(a, b);
      std::vector<float> seen(2);
      a.download(seen.data(), y.f32(), 8);
      CHECK(seen == (fork ? std::vector<float>{2, 3} : std::vector<float>{1, 2}));
    }
    mt::cpu_strict_stream_destroy(b);
    mt::cpu_strict_backend_destroy(a);
  }
}

TEST_CASE("strict streams: host reads and numbers wait for the stream's own queue") {
  mt::Backend a = mt::cpu_strict_backend_create();
  {
    mt::Buffer x(a, mt::DType::f32, 3);
    x.from_host(std::vector<float>{3, 4, 12});
    a.scale({.n = 3, .factor = 2.0f, .x = x.f32()});  // queued
    mt::Buffer sum(a, mt::DType::f64, 1);
    sum.from_host(std::vector<double>{0.0});
    a.sum_scalars({.n = 1, .x = sum.f64(), .scale = 0.0, .sum = sum.f64()});  // queued too
    CHECK(sum.to_host_f64() == std::vector<double>{0.0});  // runs the queue first
    CHECK(x.to_host_f32() == std::vector<float>{6, 8, 24});
  }
  mt::cpu_strict_backend_destroy(a);
}
