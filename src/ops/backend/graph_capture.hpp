#pragma once
// The passes of a training step as device graphs (training.cuda_graph). Each pass, named by its
// region ("forward chunk 0 mb 1"), runs as it is in the first step (which sizes every cache and
// arena), is captured in the second (CUDA stream capture, or the strict CPU backend's recording)
// and launched, and is replayed in every later step.
// A replay still runs the host's code of the pass, so the model's bookkeeping (arena offsets,
// saved activations) stays as it would be; the Backend hands each op here instead of queueing
// it, and it must be the op the capture recorded, with the same argument words, or the replay
// stops with a std::logic_error naming it. Uploads (a micro-batch's tokens) are the one input
// that changes: the capture copies them from host buffers of its own (pinned on a GPU), which
// the replay refills before the launch. The host may not wait for the device inside a captured
// pass: downloads, syncs, allocations and ops returning a number are refused, naming the pass.
// A slot's host buffer is refilled a step after its last read: the step's end waits for the
// device (the download of its scalars), so that read is done.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mt {

struct Backend;
class DeviceCounters;
struct DeviceState;
struct OpTable;

class GraphCapture {
 public:
  GraphCapture() = default;
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  // Around one pass on the stream its graph is launched on (and counted, as one graph_launch).
  void begin(const Backend& stream, const std::string& region);
  void end();

  // The Backend's hooks while a pass is captured or replayed.
  bool active() const { return mode_ != Mode::off; }
  bool replaying() const { return mode_ == Mode::replay; }
  // An op: recorded (false: queue it, captured) or checked against the recording (true: skip).
  bool op(int kind, const DeviceState* stream, std::vector<uint64_t> words);
  void upload(const OpTable* ops, DeviceState* stream, void* dst, const void* src, size_t bytes);
  [[noreturn]] void refuse(const std::string& what) const;

  // Passes captured, and replays launched, so far.
  long long captures() const { return captures_; }
  long long replays() const { return replays_; }

 private:
  enum class Mode { off, capture, replay };
  struct Op {
    int kind;
    const DeviceState* stream;
    std::vector<uint64_t> words;
  };
  struct Slot {
    void* host = nullptr;
    void* dst = nullptr;
    size_t bytes = 0;
  };
  struct Pass {
    int runs = 0;
    const OpTable* ops = nullptr;
    DeviceState* stream = nullptr;
    DeviceCounters* counters = nullptr;
    void* graph = nullptr;
    std::vector<Op> recorded;
    std::vector<Slot> slots;
  };
  [[noreturn]] void mismatch(const std::string& what) const;

  std::map<std::string, Pass> passes_;
  Pass* pass_ = nullptr;  // the pass between begin() and end()
  std::string region_;
  Mode mode_ = Mode::off;
  size_t next_op_ = 0, next_slot_ = 0;
  long long captures_ = 0, replays_ = 0;
};

}  // namespace mt
