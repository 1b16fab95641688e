#include "ops/backend/device_timer.hpp"

#include <stdexcept>

namespace mt {

DeviceTimer::~DeviceTimer() {
  for (auto [from, to] : ended_) backend_.mark_destroy(from), backend_.mark_destroy(to);
  if (open_) backend_.mark_destroy(open_);
  for (void* m : spare_) backend_.mark_destroy(m);
}

void* DeviceTimer::fresh_mark() {
  if (spare_.empty()) return backend_.mark_create();
  void* m = spare_.back();
  spare_.pop_back();
  return m;
}

void DeviceTimer::begin() {
  if (open_) throw std::logic_error("DeviceTimer::begin inside an interval (intervals do not nest)");
  open_ = fresh_mark();
  backend_.mark_record(open_);
}

void DeviceTimer::end() {
  if (!open_) throw std::logic_error("DeviceTimer::end without begin");
  void* to = fresh_mark();
  backend_.mark_record(to);
  ended_.emplace_back(open_, to);
  open_ = nullptr;
}

double DeviceTimer::take_seconds() {
  double total = 0;
  for (auto [from, to] : ended_) {
    total += backend_.mark_seconds(from, to);
    spare_.push_back(from);
    spare_.push_back(to);
  }
  ended_.clear();
  return total;
}

}  // namespace mt
