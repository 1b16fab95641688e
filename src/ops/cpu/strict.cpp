// The strict CPU backend: the CPU op table over memory that is readable only while one of the
// table's own entries runs. Every allocation comes from one reserved address range; entering an
// op opens the used part of the range (PROT_READ | PROT_WRITE), leaving the last running op
// closes it again (PROT_NONE). Host code that dereferences a device pointer outside an op gets
// SIGSEGV, which is how the tests prove that layers, optimizer and trainer keep to
// upload/download. Ops on two threads (DualPipe's overlapped pairs) keep the range open until both
// have left.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "ops/cpu/cpu_ops.hpp"

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

StrictMemory& memory(DeviceState* s) { return *reinterpret_cast<StrictMemory*>(s); }

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
    Opened open(s);
    return (cpu_ops().*Field)(nullptr, a);
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
void strict_release(DeviceState* s, void* p) { memory(s).release(p); }
void strict_copy(DeviceState* s, void* dst, const void* src, size_t bytes) {
  Opened open(s);
  std::memcpy(dst, src, bytes);
}
void strict_zero(DeviceState* s, void* dst, size_t bytes) {
  Opened open(s);
  std::memset(dst, 0, bytes);
}
void strict_sync(DeviceState*) {}

const OpTable& strict_ops() {
  static const OpTable table = [] {
    OpTable t{};
    t.name = "cpu-strict";
    t.alloc = strict_alloc;
    t.release = strict_release;
    t.upload = strict_copy;
    t.download = strict_copy;
    t.copy = strict_copy;
    t.zero = strict_zero;
    t.synchronize = strict_sync;
    t.mark_create = cpu::mark_create;
    t.mark_destroy = cpu::mark_destroy;
    t.mark_record = cpu::mark_record;
    t.mark_seconds = cpu::mark_seconds;
#define MT_GUARD_ENTRY(op) t.op = guard<&OpTable::op>();
    MT_OP_LIST(MT_GUARD_ENTRY)
#undef MT_GUARD_ENTRY
    return t;
  }();
  return table;
}

}  // namespace

Backend cpu_strict_backend_create() {
  return Backend{&strict_ops(), reinterpret_cast<DeviceState*>(new StrictMemory())};
}

void cpu_strict_backend_destroy(Backend& b) {
  delete reinterpret_cast<StrictMemory*>(b.state);
  b = Backend{};
}

}  // namespace mt
