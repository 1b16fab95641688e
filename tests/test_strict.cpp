// The strict CPU backend: device memory is readable by its ops and by upload/download, and by
// nothing else. Each check that expects a crash runs in a forked child.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>

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
