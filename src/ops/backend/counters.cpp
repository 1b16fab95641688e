#include "ops/backend/counters.hpp"

#include <algorithm>
#include <stdexcept>

#include "ops/op_list.hpp"

namespace mt {

namespace {

const char* const kKindNames[] = {
#define MT_KIND_NAME(op, ...) #op,
    MT_OPS(MT_KIND_NAME)
#undef MT_KIND_NAME
    "copy", "zero", "graph_launch"};
constexpr int kKinds = int(sizeof kKindNames / sizeof kKindNames[0]);

void add(Transfers& t, size_t bytes) {
  ++t.count;
  t.bytes += (long long)bytes;
}

}  // namespace

int op_kind_count() { return kKinds; }
const char* op_kind_name(int kind) { return kind >= 0 && kind < kKinds ? kKindNames[kind] : "?"; }
int op_kind_copy() { return kKinds - 3; }
int op_kind_zero() { return kKinds - 2; }
int op_kind_graph_launch() { return kKinds - 1; }

long long Counts::op_launches() const {
  long long n = 0;
  for (long long c : ops) n += c;
  return n;
}

Counts& Counts::operator+=(const Counts& o) {
  uploads.count += o.uploads.count, uploads.bytes += o.uploads.bytes;
  downloads.count += o.downloads.count, downloads.bytes += o.downloads.bytes;
  allocations.count += o.allocations.count, allocations.bytes += o.allocations.bytes;
  syncs += o.syncs, releases += o.releases;
  ops.resize(std::max(ops.size(), o.ops.size()), 0);
  for (size_t k = 0; k < o.ops.size(); ++k) ops[k] += o.ops[k];
  return *this;
}

Counts Counts::operator-(const Counts& o) const {
  Counts d = *this;
  d.uploads.count -= o.uploads.count, d.uploads.bytes -= o.uploads.bytes;
  d.downloads.count -= o.downloads.count, d.downloads.bytes -= o.downloads.bytes;
  d.allocations.count -= o.allocations.count, d.allocations.bytes -= o.allocations.bytes;
  d.syncs -= o.syncs, d.releases -= o.releases;
  d.ops.resize(std::max(d.ops.size(), o.ops.size()), 0);
  for (size_t k = 0; k < o.ops.size(); ++k) d.ops[k] -= o.ops[k];
  return d;
}

DeviceCounters::DeviceCounters() { counts_.ops.assign(size_t(kKinds), 0); }
DeviceCounters::~DeviceCounters() = default;

void DeviceCounters::upload(size_t bytes) {
  std::lock_guard lock(mu_);
  add(counts_.uploads, bytes);
}

// A round trip, counted; it also enters the innermost region's trace, so a failed check says
// where it was.
void DeviceCounters::round_trip(int trace_kind, size_t bytes) {
  std::lock_guard lock(mu_);
  if (trace_kind == kTraceDownload) add(counts_.downloads, bytes);
  else if (trace_kind == kTraceAllocation) add(counts_.allocations, bytes);
  else ++counts_.syncs;
  if (tracing_ && !open_.empty()) open_.back().trace.push_back({trace_kind, nullptr, {uint64_t(bytes)}});
}

void DeviceCounters::download(size_t bytes) { round_trip(kTraceDownload, bytes); }
void DeviceCounters::sync() { round_trip(kTraceSync, 0); }
void DeviceCounters::allocation(size_t bytes) { round_trip(kTraceAllocation, bytes); }

void DeviceCounters::release() {
  std::lock_guard lock(mu_);
  ++counts_.releases;
}

void DeviceCounters::op(int kind, const DeviceState* stream, std::vector<uint64_t> words) {
  std::lock_guard lock(mu_);
  ++counts_.ops[size_t(kind)];
  if (tracing_ && !open_.empty()) open_.back().trace.push_back({kind, stream, std::move(words)});
}

Counts DeviceCounters::total() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void DeviceCounters::record_regions(bool on, bool trace) {
  std::lock_guard lock(mu_);
  regions_ = on;
  tracing_ = on && trace;
}

void DeviceCounters::begin_region(std::string name) {
  std::lock_guard lock(mu_);
  if (!regions_) return;
  open_.push_back({std::move(name), counts_, {}});
}

void DeviceCounters::end_region() {
  std::lock_guard lock(mu_);
  if (!regions_) return;
  if (open_.empty()) throw std::logic_error("DeviceCounters::end_region without an open region");
  Open& o = open_.back();
  closed_.push_back({std::move(o.name), counts_ - o.at_begin, std::move(o.trace)});
  open_.pop_back();
}

std::vector<Region> DeviceCounters::take_regions() {
  std::lock_guard lock(mu_);
  std::vector<Region> out = std::move(closed_);
  closed_.clear();
  return out;
}

DeviceCounters& DeviceCounters::staging() {
  std::lock_guard lock(mu_);
  if (!staging_) staging_ = std::make_unique<DeviceCounters>();
  return *staging_;
}

}  // namespace mt
