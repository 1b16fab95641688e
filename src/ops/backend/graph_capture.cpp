#include "ops/backend/graph_capture.hpp"

#include <cstring>
#include <stdexcept>

#include "ops/ops.hpp"

namespace mt {

GraphCapture::~GraphCapture() {
  for (auto& [name, p] : passes_) {
    if (p.graph) p.ops->graph_destroy(p.stream, p.graph);
    for (Slot& s : p.slots) p.ops->host_release(p.stream, s.host);
  }
}

void GraphCapture::begin(const Backend& b, const std::string& region) {
  const OpTable* ops = b.ops;
  DeviceState* stream = b.state;
  if (pass_) throw std::logic_error("GraphCapture: pass " + region + " begins inside pass " + region_);
  if (!ops->graph_begin)
    throw std::logic_error(std::string("GraphCapture: the ") + ops->name + " device has no graphs");
  Pass& p = passes_[region];
  pass_ = &p;
  region_ = region;
  next_op_ = next_slot_ = 0;
  if (p.runs == 0) {
    mode_ = Mode::off;  // the warm-up: every cache and arena takes its size
    return;
  }
  if (p.graph) {
    if (p.stream != stream) mismatch("it is launched on another stream than the one captured");
    mode_ = Mode::replay;
    return;
  }
  p.ops = ops;
  p.stream = stream;
  p.counters = b.counters;
  mode_ = Mode::capture;
  ops->graph_begin(stream);
}

void GraphCapture::end() {
  if (!pass_) throw std::logic_error("GraphCapture::end without a pass");
  Pass& p = *pass_;
  const Mode mode = mode_;
  mode_ = Mode::off;
  pass_ = nullptr;
  ++p.runs;
  if (mode == Mode::off) return;
  if (mode == Mode::capture) {
    p.graph = p.ops->graph_end(p.stream);
    ++captures_;
  } else {
    if (next_op_ != p.recorded.size()) mismatch("it queued " + std::to_string(next_op_) + " ops, the capture " +
                                                std::to_string(p.recorded.size()));
    if (next_slot_ != p.slots.size()) mismatch("it uploaded " + std::to_string(next_slot_) + " times, the capture " +
                                               std::to_string(p.slots.size()));
    ++replays_;
  }
  p.ops->graph_launch(p.stream, p.graph);
  if (p.counters) p.counters->op(op_kind_graph_launch(), p.stream);
}

bool GraphCapture::op(int kind, const DeviceState* stream, std::vector<uint64_t> words) {
  if (mode_ == Mode::capture) {
    pass_->recorded.push_back({kind, stream, std::move(words)});
    return false;
  }
  const std::vector<Op>& rec = pass_->recorded;
  const std::string nth = "op " + std::to_string(next_op_ + 1) + " (" + op_kind_name(kind) + ")";
  if (next_op_ >= rec.size()) mismatch(nth + " is past the " + std::to_string(rec.size()) + " ops captured");
  const Op& want = rec[next_op_++];
  if (want.kind != kind) mismatch(nth + " was " + op_kind_name(want.kind) + " when captured");
  if (want.stream != stream) mismatch(nth + " runs on another stream than when captured");
  if (want.words != words) mismatch(nth + " has other arguments (sizes, pointers or factors) than when captured");
  return true;
}

void GraphCapture::upload(const OpTable* ops, DeviceState* stream, void* dst, const void* src, size_t bytes) {
  if (mode_ == Mode::capture) {
    if (!ops->upload_async || !ops->host_alloc) refuse("an upload on a stream without graphs");
    Slot s{ops->host_alloc(stream, bytes), dst, bytes};
    std::memcpy(s.host, src, bytes);
    ops->upload_async(stream, dst, s.host, bytes);
    pass_->slots.push_back(s);
    return;
  }
  const std::string nth = "upload " + std::to_string(next_slot_ + 1);
  if (next_slot_ >= pass_->slots.size()) mismatch(nth + " is past the " + std::to_string(pass_->slots.size()) +
                                                  " uploads captured");
  const Slot& s = pass_->slots[next_slot_++];
  if (s.dst != dst || s.bytes != bytes) mismatch(nth + " has another destination or size than when captured");
  std::memcpy(s.host, src, bytes);
}

void GraphCapture::refuse(const std::string& what) const {
  throw std::logic_error("training.cuda_graph: " + what + " inside the captured pass " + region_ +
                         ": a graph cannot make the host wait for the device (train --check-capture lists them)");
}

void GraphCapture::mismatch(const std::string& what) const {
  throw std::logic_error("training.cuda_graph: the replay of pass " + region_ + " differs from its capture: " + what);
}

}  // namespace mt
