#pragma once
// Ordering between queues of one device (a GPU's streams): a Mark recorded on one backend, waited
// for by another. A CUDA event may be destroyed once waited for (the wait keeps what it needs), so
// a Mark owns its event and frees it when it goes. On the CPU every op finished at its call, and a
// wait does nothing.
#include "ops/ops.hpp"

namespace mt {

class Mark {
 public:
  Mark() = default;
  // Reached once `on` has done everything queued on it before this call.
  static Mark recorded(const Backend& on) {
    Mark m;
    m.owner_ = on;
    m.mark_ = on.mark_create();
    on.mark_record(m.mark_);
    return m;
  }
  Mark(Mark&& o) noexcept : owner_(o.owner_), mark_(o.mark_) { o.mark_ = nullptr; }
  Mark& operator=(Mark&& o) noexcept {
    if (this != &o) {
      release();
      owner_ = o.owner_, mark_ = o.mark_;
      o.mark_ = nullptr;
    }
    return *this;
  }
  Mark(const Mark&) = delete;
  Mark& operator=(const Mark&) = delete;
  ~Mark() { release(); }

  // The ops queued on `waiter` after this call wait until the mark is reached; the host does not.
  void make_wait(const Backend& waiter) const {
    if (mark_) waiter.mark_wait(mark_);
  }

 private:
  void release() {
    if (mark_) owner_.mark_destroy(mark_);
    mark_ = nullptr;
  }
  Backend owner_{};
  void* mark_ = nullptr;
};

// Whether two backends are one queue (whose ops run in the order issued).
inline bool same_queue(const Backend& a, const Backend& b) { return a.ops == b.ops && a.state == b.state; }

// `waiter`'s later ops run after everything queued on `source` so far.
inline void order_after(const Backend& waiter, const Backend& source) {
  if (same_queue(waiter, source)) return;  // in order already
  Mark::recorded(source).make_wait(waiter);
}

}  // namespace mt
