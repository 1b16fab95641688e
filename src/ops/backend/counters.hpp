#pragma once
// What the host asks of a device, counted where every call passes, in Backend (ops/ops.hpp): so
// cpu, cpu-strict and cuda are counted alike. One DeviceCounters serves every copy of a Backend
// (each holds a pointer to it); the runtime owns it. Counted:
//   uploads, downloads     host <-> device copies (count, bytes)
//   syncs                  waits of the host on the device: synchronize() and mark_seconds()
//   allocations, releases  device memory handed out (count, bytes) and given back
//   ops                    launches per op kind, in the order of ops/op_list.hpp, then copy, zero
//                          and graph_launch (a replayed pass: its ops are not counted again)
// The staged communicator's copies (emulating NCCL on ranks that share a device) are counted on a
// second set, staging(), so a step's own counts mean the same with NCCL on GPUs.
// Regions (a step, a pass of a micro-batch) take the counts between their begin and end, and on
// request the trace of their ops: kind, stream and argument words (arg_fields.hpp), which a
// captured graph fixes.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mt {

struct DeviceState;

struct Transfers {
  long long count = 0, bytes = 0;
};

struct Counts {
  Transfers uploads, downloads, allocations;
  long long syncs = 0, releases = 0;
  std::vector<long long> ops;  // per op kind (op_kind_name); empty: none yet

  long long op_launches() const;
  Counts& operator+=(const Counts& o);
  Counts operator-(const Counts& o) const;
  // Whether the host waited for, read from or allocated on the device (what a captured graph
  // cannot hold).
  bool host_round_trips() const { return downloads.count || syncs || allocations.count; }
};

// The op kinds counted: the op table's ops, then copy, zero and graph_launch.
int op_kind_count();
const char* op_kind_name(int kind);
int op_kind_copy();
int op_kind_zero();
int op_kind_graph_launch();

// One op of a trace. kind < 0: not an op but a host round trip inside the region (download,
// sync, allocation: kTraceDownload...), words holding its size.
struct TraceOp {
  int kind = 0;
  const DeviceState* stream = nullptr;
  std::vector<uint64_t> words;
  bool operator==(const TraceOp&) const = default;
};
constexpr int kTraceDownload = -1, kTraceSync = -2, kTraceAllocation = -3;

struct Region {
  std::string name;
  Counts counts;
  std::vector<TraceOp> trace;  // with tracing on
};

class DeviceCounters {
 public:
  DeviceCounters();
  ~DeviceCounters();
  DeviceCounters(const DeviceCounters&) = delete;
  DeviceCounters& operator=(const DeviceCounters&) = delete;

  void upload(size_t bytes);
  void download(size_t bytes);
  void sync();
  void allocation(size_t bytes);
  void release();
  // An op launch; `words` only when tracing() (the caller skips making them otherwise).
  void op(int kind, const DeviceState* stream, std::vector<uint64_t> words = {});
  bool tracing() const { return tracing_; }
  // Regions are kept only while recording (none by default); `trace` adds their ops.
  void record_regions(bool on, bool trace = false);

  // Every count since the counters were made.
  Counts total() const;
  // Regions nest: end_region() closes the innermost open one and keeps it for take_regions().
  // Ops are traced into the innermost open region.
  void begin_region(std::string name);
  void end_region();
  std::vector<Region> take_regions();

  // The counters of the staged communicator's copies.
  DeviceCounters& staging();

 private:
  void round_trip(int trace_kind, size_t bytes);
  mutable std::mutex mu_;
  Counts counts_;
  struct Open {
    std::string name;
    Counts at_begin;
    std::vector<TraceOp> trace;
  };
  std::vector<Open> open_;
  std::vector<Region> closed_;
  std::atomic<bool> regions_ = false;
  std::atomic<bool> tracing_ = false;
  std::unique_ptr<DeviceCounters> staging_;
};

// A region from construction to destruction; nothing without counters.
class CountedRegion {
 public:
  CountedRegion(DeviceCounters* c, const std::string& name) : c_(c) {
    if (c_) c_->begin_region(name);
  }
  ~CountedRegion() {
    if (c_) c_->end_region();
  }
  CountedRegion(const CountedRegion&) = delete;
  CountedRegion& operator=(const CountedRegion&) = delete;

 private:
  DeviceCounters* c_;
};

}  // namespace mt
