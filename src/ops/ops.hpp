#pragma once
// The op table: every numeric operation the model performs, with one signature per op, listed in
// ops/op_list.hpp. Each op family's folder (ops/gemm/, ops/rmsnorm/, ...) holds its arguments, its
// CPU reference (cpu.cpp) and its CUDA kernels (cuda.cu); ops/backend/ puts them in the tables.
// Layers call ops only through a Backend, so a device is a table plus its state.
// All tensors are row-major; pointers live on the backend's device.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_list.hpp"

namespace mt {

struct DeviceState;  // opaque per-device state (cuBLASLt handle, stream, workspace); null on CPU
class FallbackCounts;  // ops/backend/fallback_counts.hpp

struct OpTable {
  const char* name;
  // Device memory is ordinary host memory that the host may read (the plain CPU backend):
  // communication can hand device pointers to MPI without staging copies.
  bool host_addressable = false;
  void* (*alloc)(DeviceState*, size_t bytes);
  void (*release)(DeviceState*, void*);
  void (*upload)(DeviceState*, void* dst, const void* src, size_t bytes);
  void (*download)(DeviceState*, void* dst, const void* src, size_t bytes);
  void (*synchronize)(DeviceState*);
  void (*copy)(DeviceState*, void* dst, const void* src, size_t bytes);  // device to device
  void (*zero)(DeviceState*, void* dst, size_t bytes);
  // Time marks: record() notes when the device reaches this point of its op order (a CUDA event;
  // on the CPU, whose ops finish at the call, the clock); seconds() waits until `to` is reached.
  void* (*mark_create)(DeviceState*);
  void (*mark_destroy)(DeviceState*, void* mark);
  void (*mark_record)(DeviceState*, void* mark);
  double (*mark_seconds)(DeviceState*, void* from, void* to);
  // The ops queued on this backend after the call wait until `mark` (recorded on any backend of
  // the same device: another stream) is reached. The host does not wait.
  void (*mark_wait)(DeviceState*, void* mark);

#define MT_OP_ENTRY(name, Args, Result) Result (*name)(DeviceState*, const Args&) = nullptr;
  MT_OPS(MT_OP_ENTRY)
#undef MT_OP_ENTRY

  // The GEMMs this device ran another way than its first choice, by kind and shape; null (no
  // entry) for a device with one way only. Read it through backend_fallbacks().
  const FallbackCounts* (*fallbacks)(DeviceState*) = nullptr;
};

// Names of the table entries a backend leaves empty (it cannot run the whole model yet).
std::vector<std::string> missing_ops(const OpTable& t);

// A device: its op table and its state. Layers hold a Backend& and call through it.
struct Backend {
  const OpTable* ops = nullptr;
  DeviceState* state = nullptr;

#define MT_OP_CALL(name, Args, Result) \
  Result name(const Args& a) const { return ops->name(state, a); }
  MT_OPS(MT_OP_CALL)
#undef MT_OP_CALL

  // Memory: device buffers are reached from the host only through these.
  void* alloc(size_t bytes) const { return ops->alloc(state, bytes); }
  void release(void* p) const { ops->release(state, p); }
  void upload(void* dst, const void* src, size_t bytes) const { ops->upload(state, dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) const { ops->download(state, dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) const { ops->copy(state, dst, src, bytes); }
  void zero(void* dst, size_t bytes) const { ops->zero(state, dst, bytes); }
  void synchronize() const { ops->synchronize(state); }
  void* mark_create() const { return ops->mark_create(state); }
  void mark_destroy(void* m) const { ops->mark_destroy(state, m); }
  void mark_record(void* m) const { ops->mark_record(state, m); }
  double mark_seconds(void* from, void* to) const { return ops->mark_seconds(state, from, to); }
  void mark_wait(void* m) const { ops->mark_wait(state, m); }
  bool host_addressable() const { return ops->host_addressable; }
};

const OpTable& cpu_ops();
Backend cpu_backend();

// The CPU op table with device discipline enforced: every buffer it allocates is unreadable
// (mprotect PROT_NONE) except during its own op calls, so host code that touches device memory
// dies at once. Numerically identical to cpu_backend().
// Its ops are queued per backend and run in order only when something needs their results, as on a
// GPU stream that runs behind the host; cpu_strict_stream_create makes another stream of the same
// device (shared memory, its own queue), ordered with the others only by marks.
Backend cpu_strict_backend_create();
void cpu_strict_backend_destroy(Backend& b);
Backend cpu_strict_stream_create(const Backend& first);
void cpu_strict_stream_destroy(Backend& stream);

}  // namespace mt
