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

#include "ops/backend/arg_fields.hpp"
#include "ops/backend/counters.hpp"
#include "ops/backend/graph_capture.hpp"
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

  // CUDA graphs (training.cuda_graph; ops/backend/graph_capture.hpp); null on a device without
  // them. Between graph_begin and graph_end the work queued on this stream, and on the streams
  // that wait on its marks, is recorded instead of run; graph_launch queues it again, as recorded.
  // upload_async queues a copy from host memory made by host_alloc (pinned on a GPU), read when
  // the device reaches it.
  void (*graph_begin)(DeviceState*) = nullptr;
  void* (*graph_end)(DeviceState*) = nullptr;
  void (*graph_launch)(DeviceState*, void* graph) = nullptr;
  void (*graph_destroy)(DeviceState*, void* graph) = nullptr;
  void* (*host_alloc)(DeviceState*, size_t bytes) = nullptr;
  void (*host_release)(DeviceState*, void* p) = nullptr;
  void (*upload_async)(DeviceState*, void* dst, const void* src, size_t bytes) = nullptr;

  // The GEMMs this device ran another way than its first choice, by kind and shape; null (no
  // entry) for a device with one way only. Read it through backend_fallbacks().
  const FallbackCounts* (*fallbacks)(DeviceState*) = nullptr;
};

// Names of the table entries a backend leaves empty (it cannot run the whole model yet).
std::vector<std::string> missing_ops(const OpTable& t);

// The op kinds in table order, as DeviceCounters counts them (op_kind_name).
enum OpKind : int {
#define MT_OP_KIND(name, ...) op_kind_##name,
  MT_OPS(MT_OP_KIND)
#undef MT_OP_KIND
};

// A device: its op table and its state. Layers hold a Backend& and call through it. Every call
// is counted on `counters` when set (ops/backend/counters.hpp), and goes through `graph` while it
// captures or replays a pass (ops/backend/graph_capture.hpp): copies of a Backend share both.
struct Backend {
  const OpTable* ops = nullptr;
  DeviceState* state = nullptr;
  DeviceCounters* counters = nullptr;
  GraphCapture* graph = nullptr;

  // No op returns a value to the host: results stay in device memory. A replayed pass's ops are
  // in its graph, launched (and counted) once.
#define MT_OP_CALL(name, Args, Result)                       \
  Result name(const Args& a) const {                         \
    if (taken_by_graph(op_kind_##name, a)) return Result();  \
    return ops->name(state, a);                              \
  }
  MT_OPS(MT_OP_CALL)
#undef MT_OP_CALL

  // Memory: device buffers are reached from the host only through these.
  void* alloc(size_t bytes) const {
    if (counters) counters->allocation(bytes);
    if (graph && graph->active()) graph->refuse("an allocation");
    return ops->alloc(state, bytes);
  }
  // Not refused inside a captured pass: releases run while an error unwinds one.
  void release(void* p) const {
    if (counters) counters->release();
    ops->release(state, p);
  }
  void upload(void* dst, const void* src, size_t bytes) const {
    if (counters) counters->upload(bytes);
    if (graph && graph->active()) return graph->upload(ops, state, dst, src, bytes);
    ops->upload(state, dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) const {
    if (counters) counters->download(bytes);
    if (graph && graph->active()) graph->refuse("a download");
    ops->download(state, dst, src, bytes);
  }
  void copy(void* dst, const void* src, size_t bytes) const {
    if (!taken_by_graph(op_kind_copy(), CopyWords{dst, src, bytes})) ops->copy(state, dst, src, bytes);
  }
  void zero(void* dst, size_t bytes) const {
    if (!taken_by_graph(op_kind_zero(), CopyWords{dst, nullptr, bytes})) ops->zero(state, dst, bytes);
  }
  void synchronize() const {
    if (counters) counters->sync();
    if (graph && graph->active()) graph->refuse("a host sync");
    ops->synchronize(state);
  }
  void* mark_create() const { return ops->mark_create(state); }
  void mark_destroy(void* m) const { ops->mark_destroy(state, m); }
  // Marks inside a captured pass order its streams within the graph; a replay has them already.
  void mark_record(void* m) const {
    if (graph && graph->replaying()) return;
    ops->mark_record(state, m);
  }
  double mark_seconds(void* from, void* to) const {
    if (counters) counters->sync();
    if (graph && graph->active()) graph->refuse("a read of a time mark (a host sync)");
    return ops->mark_seconds(state, from, to);
  }
  void mark_wait(void* m) const {
    if (graph && graph->replaying()) return;
    ops->mark_wait(state, m);
  }
  bool host_addressable() const { return ops->host_addressable; }

 private:
  struct CopyWords {
    const void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  // Every op call's start: true when a capture or a replay takes the call (the op is not run now),
  // else the call is counted and its caller runs it.
  template <class A>
  bool taken_by_graph(int kind, const A& a) const {
    if (graph && graph->active() && graph->op(kind, state, arg_words(a))) return true;
    if (counters) counters->op(kind, state, counters->tracing() ? arg_words(a) : std::vector<uint64_t>{});
    return false;
  }
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
