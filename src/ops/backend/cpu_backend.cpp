// The CPU op table. Host memory is the device memory, so the memory entries are plain copies.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ops/backend/cpu_ops.hpp"

namespace mt {

namespace {
// A failed allocation is an error naming its size, not a null buffer that segfaults at first use.
void* host_alloc(DeviceState*, size_t bytes) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p)
    throw std::runtime_error("out of memory: " + std::to_string(bytes) + " bytes of host memory could not be " +
                             "allocated (a smaller model or training.micro_batch, or more tp/pp ranks)");
  return p;
}
void host_release(DeviceState*, void* p) { std::free(p); }
void host_copy(DeviceState*, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void host_zero(DeviceState*, void* dst, size_t bytes) { std::memset(dst, 0, bytes); }
void host_sync(DeviceState*) {}
}  // namespace

const OpTable& cpu_ops() {
  static const OpTable table = [] {
    OpTable t{};
    t.name = "cpu";
    t.host_addressable = true;
    t.alloc = host_alloc;
    t.release = host_release;
    t.upload = host_copy;
    t.download = host_copy;
    t.synchronize = host_sync;
    t.copy = host_copy;
    t.zero = host_zero;
    t.mark_create = cpu::mark_create;
    t.mark_destroy = cpu::mark_destroy;
    t.mark_record = cpu::mark_record;
    t.mark_seconds = cpu::mark_seconds;
    t.mark_wait = cpu::mark_wait;
#define MT_CPU_ENTRY(op, ...) t.op = cpu::op;
    MT_OPS(MT_CPU_ENTRY)
#undef MT_CPU_ENTRY
    return t;
  }();
  return table;
}

Backend cpu_backend() { return Backend{&cpu_ops(), nullptr}; }

std::vector<std::string> missing_ops(const OpTable& t) {
  std::vector<std::string> out;
#define MT_NEED_ENTRY(op, ...) \
  if (!t.op) out.push_back(#op);
  MT_OPS(MT_NEED_ENTRY)
#undef MT_NEED_ENTRY
  return out;
}

}  // namespace mt
