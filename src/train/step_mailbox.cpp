#include "train/step_mailbox.hpp"

#include <stdexcept>

namespace mt {

void StepMailbox::communicate(const pipeline::CommOp& op) {
  const Key key = pipeline::key_of(op.transfer);
  switch (op.kind) {
    case pipeline::CommKind::post_recv: {
      InFlight& r = receiving_[key];
      r.parcel.data = buffers_.take(main());
      r.request = pp_.irecv(device_span(r.parcel.data), op.peer);
      break;
    }
    case pipeline::CommKind::wait_recv: {
      auto it = receiving_.find(key);
      wait_time_.time([&] { it->second.request->wait(); });
      it->second.parcel.ready = Mark::recorded(main());
      mailbox_[key] = std::move(it->second.parcel);
      receiving_.erase(it);
      break;
    }
    case pipeline::CommKind::send: {
      auto it = outbox_.find(key);
      InFlight s{std::move(it->second), nullptr};
      outbox_.erase(it);
      s.parcel.ready.make_wait(main());
      s.request = pp_.isend(device_span(s.parcel.data), op.peer);
      sends_.push_back(std::move(s));
      break;
    }
  }
}

void StepMailbox::deliver(const pipeline::Transfer& t, const Backend& stream, const float* data) {
  const int to = pl_.slot(t.flow, pipeline::receiving_position(t)).rank;
  Parcel parcel{buffers_.take(stream), {}};
  stream.copy(parcel.data.f32(), data, parcel.data.bytes());
  parcel.ready = Mark::recorded(stream);
  (to == me_ ? mailbox_ : outbox_)[pipeline::key_of(t)] = std::move(parcel);
}

Parcel StepMailbox::take(const pipeline::Transfer& t, const Backend& stream) {
  auto it = mailbox_.find(pipeline::key_of(t));
  if (it == mailbox_.end()) throw std::logic_error("pipeline input missing (a schedule bug)");
  Parcel parcel = std::move(it->second);
  mailbox_.erase(it);
  parcel.ready.make_wait(stream);
  return parcel;
}

void StepMailbox::release(Parcel& parcel, const Backend& last_user) {
  if (parcel.data.count()) buffers_.give(std::move(parcel.data), last_user);
}

void StepMailbox::finish() {
  wait_time_.time([&] {
    for (auto& s : sends_) s.request->wait();
  });
  for (auto& s : sends_) buffers_.give(std::move(s.parcel.data), main());
  sends_.clear();
  if (!mailbox_.empty() || !outbox_.empty() || !receiving_.empty())
    throw std::logic_error("pipeline step ended with transfers left over (a schedule bug)");
}

}  // namespace mt
