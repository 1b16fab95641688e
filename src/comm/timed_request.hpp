#pragma once
// What the timing decorators of Comm and DeviceComm share: a non-blocking call whose issue and
// whose wait() both go through the decorator's timer (the time a caller spends blocked on it).
#include <functional>
#include <memory>
#include <utility>

#include "comm/comm.hpp"

namespace mt {

// Runs a piece of work and counts its time.
using TimeIt = std::function<void(const std::function<void()>&)>;

class TimedRequest final : public Request {
 public:
  TimedRequest(std::unique_ptr<Request> inner, TimeIt timed) : inner_(std::move(inner)), timed_(std::move(timed)) {}
  void wait() override { timed_([&] { inner_->wait(); }); }

 private:
  std::unique_ptr<Request> inner_;
  TimeIt timed_;
};

// Issues `call` (which returns a Request) under `timed`; the Request it returns is timed too.
template <class Call>
std::unique_ptr<Request> timed_request(const TimeIt& timed, Call&& call) {
  std::unique_ptr<Request> issued;
  timed([&] { issued = call(); });
  return std::make_unique<TimedRequest>(std::move(issued), timed);
}

}  // namespace mt
