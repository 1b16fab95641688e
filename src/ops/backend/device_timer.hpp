#pragma once
// Time spent in intervals of a backend's op order, measured by the device: CUDA events on a GPU
// (the time the stream spent between the marks, however early the host queued the work), the
// clock on the CPU. Reading waits for the device to reach the intervals' ends, so a step reads
// its timers once, at its end, and the device runs ahead of the host until then.
#include <utility>
#include <vector>

#include "ops/ops.hpp"

namespace mt {

class DeviceTimer {
 public:
  explicit DeviceTimer(const Backend& backend) : backend_(backend) {}
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;

  // One interval: its start and end enter the op order where the host calls these.
  void begin();
  void end();
  // The seconds of every interval ended since the last call, summed; the timer starts over.
  double take_seconds();

  // Times f() as one interval.
  template <class F>
  void time(F&& f) {
    begin();
    try {
      f();
    } catch (...) {
      end();
      throw;
    }
    end();
  }

 private:
  void* fresh_mark();
  Backend backend_;
  std::vector<std::pair<void*, void*>> ended_;
  void* open_ = nullptr;       // the start of the interval in progress
  std::vector<void*> spare_;   // marks read and ready for reuse
};

}  // namespace mt
