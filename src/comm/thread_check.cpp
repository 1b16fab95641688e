#include "comm/thread_check.hpp"

namespace mt {

namespace {

std::atomic<uint64_t> overlaps{0};       // how many overlaps began
std::atomic<uint64_t> live_overlap{0};   // the one in progress; 0: none
std::atomic<uint32_t> threads_seen{0};

uint64_t thread_number() {
  thread_local const uint64_t mine = threads_seen.fetch_add(1, std::memory_order_relaxed) + 1;
  return mine;
}

}  // namespace

OverlapScope::OverlapScope() { live_overlap.store(overlaps.fetch_add(1) + 1); }

OverlapScope::~OverlapScope() { live_overlap.store(0); }

std::string ThreadCheck::enter(const char* call) {
  if (const char* other = inside_.exchange(call, std::memory_order_acquire))
    return label_ + ": " + call + " was called while another thread's " + other +
           " was still inside it (one communicator takes one thread's calls at a time)";
  const uint64_t overlap = live_overlap.load(std::memory_order_relaxed);
  if (!overlap) return {};
  const uint64_t mine = overlap << 32 | (thread_number() & 0xffffffffu);
  uint64_t owner = owner_.load(std::memory_order_relaxed);
  if (owner >> 32 != (overlap & 0xffffffffu) && owner_.compare_exchange_strong(owner, mine)) {
    owner_call_.store(call);
    return {};
  }
  if (owner == mine) return {};
  leave();
  const char* first = owner_call_.load();
  return label_ + ": " + call + " was called by one thread of an overlapped pair of passes while the other thread " +
         "called it too (" + (first ? first : "a call") +
         "); one communicator takes one thread's calls at a time, so a communicator that both passes need must "
         "take its calls from one of them";
}

}  // namespace mt
