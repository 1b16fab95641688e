#pragma once
// A check that one communicator never takes calls from two threads at once. MPI lets two threads
// call at once only on different communicators, and a collective must come in the same order on
// every rank of its communicator: two threads on one communicator corrupt the exchange or MPI's
// own state. Each MPI communicator carries one check; each call costs a few atomic operations.
//   in use   a call that finds another thread's call still inside the communicator fails.
//   overlap  while an OverlapScope lives (two passes on two threads, DualPipe's pair), the first
//            thread to call a communicator owns it until the scope ends, and a call from the
//            other thread fails even when the two calls do not meet in time: the check does not
//            depend on the threads' timing.
// A failure names the communicator and both calls; MpiComm stops the process with it (a program
// fault, never the user's input).
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

namespace mt {

class ThreadCheck {
 public:
  explicit ThreadCheck(std::string label) : label_(std::move(label)) {}
  void set_label(std::string label) { label_ = std::move(label); }
  const std::string& label() const { return label_; }
  // A call named `call` (a string literal) begins on this thread: empty, or why it may not.
  std::string enter(const char* call);
  // The call that enter() let in is over.
  void leave() { inside_.store(nullptr, std::memory_order_release); }

 private:
  std::string label_;
  std::atomic<const char*> inside_{nullptr};  // the call in progress
  std::atomic<uint64_t> owner_{0};  // (overlap number << 32) | thread number, both mod 2^32
  std::atomic<const char*> owner_call_{nullptr};  // the owner's first call in the overlap
};

// Two threads run passes at once while one lives (one at a time).
class OverlapScope {
 public:
  OverlapScope();
  ~OverlapScope();
  OverlapScope(const OverlapScope&) = delete;
  OverlapScope& operator=(const OverlapScope&) = delete;
};

}  // namespace mt
