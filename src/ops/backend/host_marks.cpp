#include <chrono>

#include "ops/backend/cpu_ops.hpp"

namespace mt::cpu {

using Mark = std::chrono::steady_clock::time_point;

void* mark_create(DeviceState*) { return new Mark(); }
void mark_destroy(DeviceState*, void* mark) { delete static_cast<Mark*>(mark); }
void mark_record(DeviceState*, void* mark) { *static_cast<Mark*>(mark) = std::chrono::steady_clock::now(); }
double mark_seconds(DeviceState*, void* from, void* to) {
  return std::chrono::duration<double>(*static_cast<Mark*>(to) - *static_cast<Mark*>(from)).count();
}
void mark_wait(DeviceState*, void*) {}

}  // namespace mt::cpu
