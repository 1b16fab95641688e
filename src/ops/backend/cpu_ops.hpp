#pragma once
// The CPU reference implementations of every op of ops/op_list.hpp (each in its family's cpu.cpp)
// and the CPU backends' time marks.
#include "ops/ops.hpp"

namespace mt::cpu {

// Time marks of the CPU backends (host_marks.cpp): ops finish at the call, so a mark is the clock.
void* mark_create(DeviceState*);
void mark_destroy(DeviceState*, void* mark);
void mark_record(DeviceState*, void* mark);
double mark_seconds(DeviceState*, void* from, void* to);
void mark_wait(DeviceState*, void* mark);  // nothing to wait for: every op finished at its call

MT_OPS(MT_OP_DECLARATION)

}  // namespace mt::cpu
