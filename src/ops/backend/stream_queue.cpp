#include "ops/backend/stream_queue.hpp"

namespace mt::cpu {

void StreamQueue::push(std::function<void()> op) {
  std::lock_guard hold(lock_);
  pending_.push_back(std::move(op));
}

void StreamQueue::run_all() {
  std::lock_guard hold(lock_);
  while (!pending_.empty()) {
    // Taken off the queue before it runs: a wait inside it may run this stream's earlier marks.
    std::function<void()> op = std::move(pending_.front());
    pending_.pop_front();
    op();
  }
}

void StreamQueue::run_until(const MarkRecord& record) {
  std::lock_guard hold(lock_);
  while (!record.reached && !pending_.empty()) {
    std::function<void()> op = std::move(pending_.front());
    pending_.pop_front();
    op();
  }
}

void StreamQueue::record(StreamMark& mark) {
  auto rec = std::make_shared<MarkRecord>();
  rec->stream = this;
  mark.last = rec;
  push([rec] {
    rec->when = std::chrono::steady_clock::now();
    rec->reached = true;
  });
}

void StreamQueue::wait(const StreamMark& mark) {
  std::shared_ptr<MarkRecord> rec = mark.last;
  if (!rec || rec->stream == this) return;  // never recorded, or this stream's own order already
  // The producer runs up to the mark now, ahead of whatever is still queued elsewhere: a producer
  // that itself forgot to wait for its inputs reads them before they are written.
  rec->stream->run_until(*rec);
  push([rec] { rec->stream->run_until(*rec); });
}

std::chrono::steady_clock::time_point StreamQueue::reach(const StreamMark& mark) {
  const std::shared_ptr<MarkRecord>& rec = mark.last;
  if (!rec) return std::chrono::steady_clock::now();
  rec->stream->run_until(*rec);
  return rec->when;
}

}  // namespace mt::cpu
