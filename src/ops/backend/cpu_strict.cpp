// The strict CPU backend: the CPU op table over memory that is readable only while one of the
// table's own entries runs. Every allocation comes from one reserved address range; entering an
// op opens the used part of the range (PROT_READ | PROT_WRITE), leaving the last running op
// closes it again (PROT_NONE). Host code that dereferences a device pointer outside an op gets
// SIGSEGV, which is how the tests prove that layers, optimizer and trainer keep to
// upload/download. Ops on two threads (DualPipe's overlapped pairs) keep the range open until both
// have left.
// Each backend made over the same memory (cpu_strict_stream_create) is an emulated stream: ops are
// queued and run later, in order (stream_queue.hpp), so that a missing wait between streams changes
// the numbers instead of passing by luck.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "ops/backend/cpu_ops.hpp"
#include "ops/backend/stream_queue.hpp"

namespace mt {

namespace {

constexpr size_t kReserve = size_t(1) << 38;  // 256 GiB of address space; only what is used is backed
// Protection changes cost per page table entry: with 2 MiB pages (transparent huge pages, where
// the kernel offers them) a change covers 512 times the memory per entry, which makes a
// protection toggle around every op affordable. The range changed is always whole huge pages.
constexpr size_t kHuge = size_t(2) << 20;

class StrictMemory {
 public:
  StrictMemory() : page_(size_t(sysconf(_SC_PAGESIZE))) {
    void* p = mmap(nullptr, kReserve + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("strict CPU backend: cannot reserve address space: " + errno_text());
    mapping_ = static_cast<std::byte*>(p);
    base_ = mapping_ + (kHuge - reinterpret_cast<uintptr_t>(mapping_) % kHuge) % kHuge;
    madvise(base_, kReserve, MADV_HUGEPAGE);  // a hint: without huge pages it is only slower
  }
  ~StrictMemory() { munmap(mapping_, kReserve + kHuge); }

  void open() {
    std::lock_guard lock(mu_);
    if (open_++ == 0) protect(PROT_READ | PROT_WRITE);
  }
  void close() {
    std::lock_guard lock(mu_);
    if (--open_ == 0) protect(PROT_NONE);
  }

  // First fit among freed blocks, else the top of the used range. Called inside open().
  void* alloc(size_t bytes) {
    std::lock_guard lock(mu_);
    const size_t size = (std::max<size_t>(bytes, 1) + page_ - 1) / page_ * page_;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const size_t at = it->first, left = it->second - size;
      free_.erase(it);
      if (left) free_[at + size] = left;
      sizes_[at] = size;
      return base_ + at;
    }
    if (top_ + size > kReserve) throw std::runtime_error("strict CPU backend: out of reserved address space");
    const size_t at = top_, was = used();
    top_ += size;
    if (open_ > 0 && used() > was) mprotect_or_die(base_ + was, used() - was, PROT_READ | PROT_WRITE);
    sizes_[at] = size;
    return base_ + at;
  }

  void release(void* p) {
    std::lock_guard lock(mu_);
    const size_t at = size_t(static_cast<std::byte*>(p) - base_);
    auto it = sizes_.find(at);
    if (it == sizes_.end()) throw std::logic_error("strict CPU backend: release of a pointer it did not allocate");
    size_t size = it->second, start = at;
    sizes_.erase(it);
    auto next = free_.find(at + size);
    if (next != free_.end()) { size += next->second; free_.erase(next); }
    auto prev = free_.lower_bound(at);
    if (prev != free_.begin() && (--prev)->first + prev->second == at) { start = prev->first; size += prev->second; }
    free_[start] = size;
  }

 private:
  static std::string errno_text() { return std::strerror(errno); }
  size_t used() const { return (top_ + kHuge - 1) / kHuge * kHuge; }
  void protect(int prot) {
    if (top_) mprotect_or_die(base_, used(), prot);
  }
  static void mprotect_or_die(void* p, size_t n, int prot) {
    if (mprotect(p, n, prot) != 0) throw std::runtime_error("strict CPU backend: mprotect failed: " + errno_text());
  }

  const size_t page_;
  std::byte* mapping_ = nullptr;
  std::byte* base_ = nullptr;  // mapping_ rounded up to a huge page
  size_t top_ = 0;
  std::mutex mu_;
  int open_ = 0;
  std::map<size_t, size_t> free_;            // offset -> size of freed blocks, coalesced
  std::unordered_map<size_t, size_t> sizes_;  // offset -> size of live blocks
};

struct StrictDevice;

// A backend's state: one stream of the device.
struct StrictStream {
  StrictDevice* device;
  cpu::StreamQueue queue;
  StrictStream(StrictDevice* d, std::recursive_mutex& lock) : device(d), queue(lock) {}
};

// A recorded graph: the work of every stream in the order the host queued it, which respects
// every mark a stream waited on, so it replays on one stream.
using StrictGraph = std::vector<std::function<void()>>;

// What all streams of one strict device share.
struct StrictDevice {
  StrictMemory memory;
  std::recursive_mutex lock;                  // every stream's queue; ops run one at a time
  std::vector<std::unique_ptr<StrictStream>> streams;
  std::unique_ptr<StrictGraph> recording;     // between graph_begin and graph_end
  void run_all() {
    std::lock_guard hold(lock);
    for (auto& st : streams) st->queue.run_all();
  }
};

StrictStream& stream(DeviceState* s) { return *reinterpret_cast<StrictStream*>(s); }
StrictDevice& device(DeviceState* s) { return *stream(s).device; }
StrictMemory& memory(DeviceState* s) { return device(s).memory; }

// Queues an op on the stream, or records it while the device captures a graph.
void enqueue(DeviceState* s, std::function<void()> op) {
  StrictDevice& d = device(s);
  std::lock_guard hold(d.lock);
  if (d.recording) d.recording->push_back(std::move(op));
  else stream(s).queue.push(std::move(op));
}

// Holds the memory open for the duration of one entry.
struct Opened {
  explicit Opened(DeviceState* s) : m(memory(s)) { m.open(); }
  ~Opened() { m.close(); }
  StrictMemory& m;
};

template <auto Field, typename Fn>
struct Guarded;
template <auto Field, typename R, typename A>
struct Guarded<Field, R (*)(DeviceState*, const A&)> {
  static R call(DeviceState* s, const A& a) {
    if constexpr (std::is_void_v<R>) {
      enqueue(s, [s, a] {
        Opened open(s);
        (cpu_ops().*Field)(nullptr, a);
      });
    } else {
      // The host needs the number now: everything queued before it runs first.
      stream(s).queue.run_all();
      Opened open(s);
      return (cpu_ops().*Field)(nullptr, a);
    }
  }
};
template <auto Field>
constexpr auto guard() {
  return &Guarded<Field, std::remove_cvref_t<decltype(cpu_ops().*Field)>>::call;
}

void* strict_alloc(DeviceState* s, size_t bytes) {
  Opened open(s);
  return memory(s).alloc(bytes);
}
// As cudaFree: the memory may be in use on any stream, so everything queued runs first.
void strict_release(DeviceState* s, void* p) {
  device(s).run_all();
  memory(s).release(p);
}
// Host copies wait for the stream, as the CUDA backend's upload and download do.
void strict_host_copy(DeviceState* s, void* dst, const void* src, size_t bytes) {
  stream(s).queue.run_all();
  Opened open(s);
  std::memcpy(dst, src, bytes);
}
void strict_copy(DeviceState* s, void* dst, const void* src, size_t bytes) {
  enqueue(s, [s, dst, src, bytes] {
    Opened open(s);
    std::memcpy(dst, src, bytes);
  });
}
void strict_zero(DeviceState* s, void* dst, size_t bytes) {
  enqueue(s, [s, dst, bytes] {
    Opened open(s);
    std::memset(dst, 0, bytes);
  });
}
void strict_sync(DeviceState* s) { stream(s).queue.run_all(); }

void strict_graph_begin(DeviceState* s) {
  StrictDevice& d = device(s);
  std::lock_guard hold(d.lock);
  if (d.recording) throw std::logic_error("strict CPU backend: a graph capture inside another");
  d.recording = std::make_unique<StrictGraph>();
}
void* strict_graph_end(DeviceState* s) {
  StrictDevice& d = device(s);
  std::lock_guard hold(d.lock);
  return d.recording.release();
}
void strict_graph_launch(DeviceState* s, void* g) {
  for (const auto& op : *static_cast<StrictGraph*>(g)) enqueue(s, op);
}
void strict_graph_destroy(DeviceState* s, void* g) {
  device(s).run_all();  // its ops may still be queued
  delete static_cast<StrictGraph*>(g);
}
// Host memory is readable at any time: the staging of a captured upload is plain memory.
void* strict_host_alloc(DeviceState*, size_t bytes) { return std::malloc(bytes ? bytes : 1); }
void strict_host_release(DeviceState*, void* p) { std::free(p); }
void strict_upload_async(DeviceState* s, void* dst, const void* src, size_t bytes) {
  enqueue(s, [s, dst, src, bytes] {
    Opened open(s);
    std::memcpy(dst, src, bytes);
  });
}

void* strict_mark_create(DeviceState*) { return new cpu::StreamMark(); }
void strict_mark_destroy(DeviceState*, void* m) { delete static_cast<cpu::StreamMark*>(m); }
void strict_mark_record(DeviceState* s, void* m) { stream(s).queue.record(*static_cast<cpu::StreamMark*>(m)); }
void strict_mark_wait(DeviceState* s, void* m) { stream(s).queue.wait(*static_cast<cpu::StreamMark*>(m)); }
double strict_mark_seconds(DeviceState*, void* from, void* to) {
  const auto a = cpu::StreamQueue::reach(*static_cast<cpu::StreamMark*>(from));
  const auto b = cpu::StreamQueue::reach(*static_cast<cpu::StreamMark*>(to));
  return std::chrono::duration<double>(b - a).count();
}

const OpTable& strict_ops() {
  static const OpTable table = [] {
    OpTable t{};
    t.name = "cpu-strict";
    t.alloc = strict_alloc;
    t.release = strict_release;
    t.upload = strict_host_copy;
    t.download = strict_host_copy;
    t.copy = strict_copy;
    t.zero = strict_zero;
    t.synchronize = strict_sync;
    t.mark_create = strict_mark_create;
    t.mark_destroy = strict_mark_destroy;
    t.mark_record = strict_mark_record;
    t.mark_seconds = strict_mark_seconds;
    t.mark_wait = strict_mark_wait;
    t.graph_begin = strict_graph_begin;
    t.graph_end = strict_graph_end;
    t.graph_launch = strict_graph_launch;
    t.graph_destroy = strict_graph_destroy;
    t.host_alloc = strict_host_alloc;
    t.host_release = strict_host_release;
    t.upload_async = strict_upload_async;
#define MT_GUARD_ENTRY(op, ...) t.op = guard<&OpTable::op>();
    MT_OPS(MT_GUARD_ENTRY)
#undef MT_GUARD_ENTRY
    return t;
  }();
  return table;
}

}  // namespace

Backend cpu_strict_backend_create() {
  auto* d = new StrictDevice();
  d->streams.push_back(std::make_unique<StrictStream>(d, d->lock));
  return Backend{&strict_ops(), reinterpret_cast<DeviceState*>(d->streams.back().get())};
}

void cpu_strict_backend_destroy(Backend& b) {
  StrictDevice* d = &device(b.state);
  d->run_all();
  delete d;
  b = Backend{};
}

Backend cpu_strict_stream_create(const Backend& first) {
  StrictDevice& d = device(first.state);
  std::lock_guard hold(d.lock);
  d.streams.push_back(std::make_unique<StrictStream>(&d, d.lock));
  return Backend{&strict_ops(), reinterpret_cast<DeviceState*>(d.streams.back().get())};
}

void cpu_strict_stream_destroy(Backend& stream_backend) {
  StrictDevice& d = device(stream_backend.state);
  // Another stream may still wait on one of its marks: everything runs first.
  d.run_all();
  std::lock_guard hold(d.lock);
  auto& all = d.streams;
  all.erase(std::find_if(all.begin(), all.end(), [&](auto& st) { return st.get() == &stream(stream_backend.state); }));
  stream_backend = Backend{};
}

}  // namespace mt
