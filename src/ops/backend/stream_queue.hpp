#pragma once
// Emulated GPU streams for the strict CPU backend. Each stream queues the ops issued on it and runs
// them in order only when something needs their results: the host (a download, an op that returns
// a number, synchronize, a release, reading a time mark), or another stream's wait on one of its
// marks, which runs it up to the mark as soon as the wait is issued. So both halves of a fork and
// join are checked: a consumer that does not wait reads what its producer has not written yet, and
// a producer that runs off a mark without waiting for its own inputs reads them before the stream
// it forked from has written them. The numbers change: the tests catch what on a GPU would be a
// race that shows only sometimes. All streams of one device share one lock and run one op at a time.
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace mt::cpu {

class StreamQueue;

// One recording of a mark: reached when its stream has run everything queued before the record.
struct MarkRecord {
  StreamQueue* stream = nullptr;
  bool reached = false;
  std::chrono::steady_clock::time_point when;
};

// A mark handle: waits and reads use the latest recording at the time of the call (as CUDA events do).
struct StreamMark {
  std::shared_ptr<MarkRecord> last;
};

class StreamQueue {
 public:
  explicit StreamQueue(std::recursive_mutex& device_lock) : lock_(device_lock) {}
  ~StreamQueue() { run_all(); }
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  void push(std::function<void()> op);
  void run_all();
  void record(StreamMark& mark);
  // This stream's later ops run after `mark`'s stream has reached it.
  void wait(const StreamMark& mark);
  // Runs `mark`'s stream up to the mark and returns when it was reached.
  static std::chrono::steady_clock::time_point reach(const StreamMark& mark);

 private:
  void run_until(const MarkRecord& record);
  std::recursive_mutex& lock_;
  std::deque<std::function<void()>> pending_;
};

}  // namespace mt::cpu
