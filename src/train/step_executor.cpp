#include "train/transfer_buffers.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "comm/device_comm.hpp"
#include "ops/device_timer.hpp"

namespace mt {

Buffer TransferBuffers::take(const Backend& writer) {
  if (spare_.empty()) {
    Buffer fresh(backend_, DType::f32, floats_);
    order_after(writer, backend_);  // its zero-fill
    return fresh;
  }
  Spare s = std::move(spare_.back());
  spare_.pop_back();
  s.released.make_wait(writer);
  return std::move(s.buffer);
}

namespace {

using pipeline::Pass;
using pipeline::Payload;
using pipeline::Transfer;
using Key = pipeline::TransferKey;
using pipeline::key_of;

// The running state of one rank's step.
class Executor {
 public:
  Executor(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, int global_batch,
           int micro_batch, const FillMicroBatch& fill, TransferBuffers& buffers)
      : model_(model), pl_(schedule.placement), g_(g), me_(g.me.pp), global_batch_(global_batch),
        micro_batch_(micro_batch), fill_(fill), scales_(loss_scales(model.config(), global_batch, micro_batch)),
        buffers_(buffers), overlapped_time_(buffers.backend()), wait_time_(buffers.backend()),
        concurrent_(g.tp->concurrent_calls() && g.ep->concurrent_calls()) {
    for (int c = 0; c < pl_.chunks_per_rank; ++c) {
      forward_time_.push_back(std::make_unique<DeviceTimer>(model.backend(c)));
      backward_time_.push_back(std::make_unique<DeviceTimer>(model.backend(c)));
      const int pos = pl_.locate(me_, c)->position;
      if (pos == 0 || pos == pl_.stages - 1) embedding_chunks_.push_back(c);
    }
    const int count = global_batch / micro_batch / g.dp->size();
    first_mb_ = g.dp->rank() * count;
    for (int c = 0; c < pl_.chunks_per_rank; ++c) {
      free_slots_.emplace_back();
      for (int s = pl_.microbatches_per_flow - 1; s >= 0; --s) free_slots_.back().push_back(s);
    }
    slot_of_.assign(pl_.chunks_per_rank, std::vector<int>(pl_.microbatches_per_flow, -1));
  }

  void run(const std::vector<pipeline::Step>& program) {
    // The chunks' streams start after what the device's first stream did before the step (the
    // last step's update of the weights), and it goes on after all of them (the gradient sums).
    for (int c = 0; c < pl_.chunks_per_rank; ++c) order_after(model_.backend(c), main());
    for (const pipeline::Step& step : program) {
      if (auto* c = std::get_if<pipeline::CommOp>(&step)) communicate(*c);
      else compute(std::get<pipeline::ComputeOp>(step));
    }
    wait_time_.time([&] {
      for (auto& s : sends_) s.request->wait();
    });
    for (auto& s : sends_) buffers_.give(std::move(s.parcel.data), main());
    sends_.clear();
    for (int c = 0; c < pl_.chunks_per_rank; ++c) order_after(main(), model_.backend(c));
    // Read once, at the end: on a GPU this waits for the device to finish the step's work.
    for (int c = 0; c < pl_.chunks_per_rank; ++c) {
      totals_.t_forward += forward_time_[c]->take_seconds();
      totals_.t_backward += backward_time_[c]->take_seconds();
    }
    totals_.t_overlapped = overlapped_time_.take_seconds();
    totals_.t_pipeline_wait = wait_time_.take_seconds();
    if (!mailbox_.empty() || !outbox_.empty() || !receiving_.empty())
      throw std::logic_error("pipeline step ended with transfers left over (a schedule bug)");
  }

  StepTotals& totals() { return totals_; }
  double shared_aux() const { return shared_aux_; }

 private:
  // The device's first stream: the pipeline group's transfers queue there.
  const Backend& main() const { return buffers_.backend(); }

  // A payload in a transfer buffer, valid once `ready` is reached (on the stream that wrote it).
  struct Parcel {
    Buffer data;
    Mark ready;
  };
  struct InFlight {
    Parcel parcel;
    std::unique_ptr<Request> request;
  };

  void communicate(const pipeline::CommOp& op) {
    const Key key = key_of(op.transfer);
    DeviceComm& pp = *g_.dev.pp;
    switch (op.kind) {
      case pipeline::CommKind::post_recv: {
        InFlight& r = receiving_[key];
        r.parcel.data = buffers_.take(main());
        r.request = pp.irecv(device_span(r.parcel.data), op.peer);
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
        s.request = pp.isend(device_span(s.parcel.data), op.peer);
        sends_.push_back(std::move(s));
        break;
      }
    }
  }

  // Hands what a task of `chunk` produced (`data`, in the model's device memory) to the position
  // that needs it: a copy in a transfer buffer, made on the chunk's stream, kept on this rank or
  // put in the outbox for the schedule's send.
  void deliver(const Transfer& t, int chunk, const float* data) {
    const int to = pl_.slot(t.flow, receiving_position(t)).rank;
    const Backend& be = model_.backend(chunk);
    Parcel parcel{buffers_.take(be), {}};
    be.copy(parcel.data.f32(), data, parcel.data.bytes());
    parcel.ready = Mark::recorded(be);
    (to == me_ ? mailbox_ : outbox_)[key_of(t)] = std::move(parcel);
  }

  // The input of a task of `chunk`: the chunk's stream waits until it is there.
  Parcel take(const Transfer& t, int chunk) {
    auto it = mailbox_.find(key_of(t));
    if (it == mailbox_.end()) throw std::logic_error("pipeline input missing (a schedule bug)");
    Parcel parcel = std::move(it->second);
    mailbox_.erase(it);
    parcel.ready.make_wait(model_.backend(chunk));
    return parcel;
  }

  // A task between its bookkeeping (inputs taken, slot chosen) and its completion (outputs
  // delivered, slot freed): only execute() touches the model, so two may run at once.
  struct Pending {
    pipeline::Task task;
    pipeline::Location loc;
    int slot = -1;
    std::vector<int> tokens, targets;
    Parcel input;  // forward: the previous stage's output; backward: the next stage's input gradient
    ForwardResult result;
  };

  bool last_position(const Pending& p) const { return p.loc.position == pl_.stages - 1; }

  // The first and last stages add into the embedding's gradient (its lookup; the MTP modules'
  // and a tied head's use of it): when this rank holds both, their weight-gradient passes run on
  // two streams, and each must wait for the other's earlier work instead of adding at the same time.
  void order_embedding_gradient(const pipeline::Task& t) {
    if (t.pass == Pass::forward || t.pass == Pass::input_grad) return;
    if (std::find(embedding_chunks_.begin(), embedding_chunks_.end(), t.chunk) == embedding_chunks_.end()) return;
    for (int other : embedding_chunks_)
      if (other != t.chunk) order_after(model_.backend(t.chunk), model_.backend(other));
  }

  Pending prepare(const pipeline::Task& t) {
    order_embedding_gradient(t);
    Pending p;
    p.task = t;
    p.loc = *pl_.locate(me_, t.chunk);
    const int pos = p.loc.position;
    if (t.pass == Pass::forward) {
      p.slot = free_slots_[t.chunk].back();
      free_slots_[t.chunk].pop_back();
      slot_of_[t.chunk][t.microbatch] = p.slot;
      fill_(first_mb_ + p.loc.flow * pl_.microbatches_per_flow + t.microbatch, p.tokens, p.targets);
      if (pos > 0) p.input = take({Payload::activation, p.loc.flow, t.microbatch, pos - 1}, t.chunk);
      return p;
    }
    p.slot = slot_of_[t.chunk][t.microbatch];
    if (t.pass != Pass::weight_grad) {
      finish_global_balance_once();
      if (!last_position(p)) p.input = take({Payload::gradient, p.loc.flow, t.microbatch, pos + 1}, t.chunk);
    }
    return p;
  }

  void execute(Pending& p) {
    const pipeline::Task& t = p.task;
    const float* input = p.input.data.count() ? p.input.data.f32() : nullptr;
    if (t.pass == Pass::forward) {
      p.result = model_.forward(t.chunk, p.slot, {p.tokens.data(), p.targets.data(), micro_batch_}, input, scales_);
    } else {
      if (t.pass != Pass::weight_grad) model_.backward_input(t.chunk, p.slot, input, t.pass == Pass::backward);
      if (t.pass != Pass::input_grad) model_.backward_weight(t.chunk, p.slot);
    }
  }

  void finish(Pending& p) {
    const pipeline::Task& t = p.task;
    const int pos = p.loc.position;
    // The pass copied its input into its arena (in its stream's order): the buffer may carry the next.
    if (p.input.data.count()) buffers_.give(std::move(p.input.data), model_.backend(t.chunk));
    if (t.pass == Pass::forward) {
      add_forward_result(totals_, p.result, model_.config(), global_batch_);
      if (!last_position(p))
        deliver({Payload::activation, p.loc.flow, t.microbatch, pos}, t.chunk, model_.output(t.chunk, p.slot));
      return;
    }
    if (t.pass != Pass::weight_grad && pos > 0)
      deliver({Payload::gradient, p.loc.flow, t.microbatch, pos}, t.chunk, model_.input_grad(t.chunk, p.slot));
    if (t.pass != Pass::input_grad) {
      model_.retire(t.chunk, p.slot);
      free_slots_[t.chunk].push_back(p.slot);
    }
  }

  // One compute operation. An overlapped pair (DualPipe's F&B) runs its forward on a second
  // thread while this one runs the backward, so either's communication inside the layers (the
  // expert all-to-alls, tensor-parallel sums) proceeds while the other computes; when the
  // communicators cannot take calls from two threads, one after the other.
  void compute(const pipeline::ComputeOp& op) {
    if (!op.overlapped_backward) {
      Pending p = prepare(op.task);
      (p.task.pass == Pass::forward ? forward_time_ : backward_time_)[p.task.chunk]->time([&] { execute(p); });
      finish(p);
      return;
    }
    // Each chunk keeps one scratch arena and one stream: the pair's passes are of two chunks.
    if (op.task.chunk == op.overlapped_backward->chunk)
      throw std::logic_error("an overlapped pair of one chunk's passes (a schedule bug)");
    Pending f = prepare(op.task), b = prepare(*op.overlapped_backward);
    // The pair's time counts once, as overlapped time: from the first stream's mark before it to
    // the mark after both chunks' streams are through.
    overlapped_time_.begin();
    // Two chunks share no layer, so their passes touch disjoint saved state and statistics.
    if (concurrent_ && f.task.chunk != b.task.chunk) {
      std::exception_ptr failed;
      std::thread forward([&] {
        try {
          execute(f);
        } catch (...) {
          failed = std::current_exception();
        }
      });
      try {
        execute(b);
      } catch (...) {
        forward.join();
        throw;
      }
      forward.join();
      if (failed) std::rethrow_exception(failed);
    } else {
      execute(f);
      execute(b);
    }
    order_after(main(), model_.backend(f.task.chunk));
    order_after(main(), model_.backend(b.task.chunk));
    overlapped_time_.end();
    finish(f);
    finish(b);
  }

  // A global-batch balance loss needs the routing of every micro-batch of the step through a
  // layer before any backward pass through it (only all-forward-all-backward schedules allow it).
  void finish_global_balance_once() {
    if (balance_done_ || model_.config().moe.aux_loss != BalanceLoss::global_batch) return;
    balance_done_ = true;
    sum_token_shares(model_, *g_.tp);
    sum_moe_statistics(model_, *g_.dp);
    shared_aux_ = finish_global_balance(model_, global_batch_);
  }

  Model& model_;
  const pipeline::Placement& pl_;
  const ParallelGroups& g_;
  int me_, global_batch_, micro_batch_, first_mb_ = 0;
  const FillMicroBatch& fill_;
  LossScales scales_;
  TransferBuffers& buffers_;
  std::vector<std::unique_ptr<DeviceTimer>> forward_time_, backward_time_;  // per chunk, on its stream
  std::vector<int> embedding_chunks_;  // this rank's chunks at the first or last position
  DeviceTimer overlapped_time_, wait_time_;                                 // on the first stream
  bool concurrent_;
  std::vector<std::vector<int>> free_slots_, slot_of_;
  std::map<Key, Parcel> mailbox_, outbox_;
  std::map<Key, InFlight> receiving_;
  std::vector<InFlight> sends_;
  StepTotals totals_;
  bool balance_done_ = false;
  double shared_aux_ = 0;
};

}  // namespace

StepTotals pipeline_step(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g, int global_batch,
                         int micro_batch, const FillMicroBatch& fill, TransferBuffers& buffers) {
  start_step(model);
  Executor run(model, schedule, g, global_batch, micro_batch, fill, buffers);
  run.run(schedule.ranks[g.me.pp]);
  StepTotals totals = run.totals();
  if (model.config().moe.aux_loss != BalanceLoss::global_batch) {
    sum_token_shares(model, *g.tp);
    sum_moe_statistics(model, *g.dp);
  }
  // DualPipe's two directions pass each layer on two ranks: the pair's loads add up.
  sum_moe_statistics(model, *g.mirror);
  std::vector<double> sums{totals.ce_sum, totals.aux, totals.mtp};
  g.dp->all_reduce_sum(sums);
  sums[1] += run.shared_aux();  // the same on every data-parallel rank
  g.pp->all_reduce_sum(sums);
  totals.ce_sum = sums[0], totals.aux = sums[1], totals.mtp = sums[2];
  return totals;
}

std::pair<double, long> pipeline_forward_only(Model& model, const pipeline::Placement& pl, const ParallelGroups& g,
                                              int sequences, int micro_batch, const FillSequences& fill,
                                              TransferBuffers& buffers) {
  const int me = g.me.pp;
  DeviceComm& pp = *g.dev.pp;
  const Backend& main = buffers.backend();  // where the pipeline group's transfers queue
  std::vector<int> inputs, targets;
  std::vector<double> sums{0.0, 0.0};  // cross-entropy, tokens
  Buffer carried = buffers.take(main);  // sized for a whole micro-batch: a smaller one uses its front
  for (int first = 0; first < sequences; first += micro_batch) {
    const int count = std::min(micro_batch, sequences - first);
    const size_t floats = carried.count() * size_t(count) / size_t(micro_batch);
    fill(first, count, inputs, targets);
    int used_chunk = -1;
    for (int pos = 0; pos < pl.stages; ++pos) {
      const pipeline::Slot here = pl.slot(0, pos);
      const int before = pos > 0 ? pl.slot(0, pos - 1).rank : -1;
      if (here.rank != me) {
        if (before == me) pp.send(device_span(carried.f32(), floats), here.rank);
        continue;
      }
      if (pos > 0 && before != me) pp.recv(device_span(carried.f32(), floats), before);
      const Backend& be = model.backend(here.chunk);
      order_after(be, main);  // what arrived, and the weights
      const ForwardResult r = model.forward(here.chunk, 0, {inputs.data(), targets.data(), count},
                                            pos > 0 ? carried.f32() : nullptr, {0.0f, 0.0f, 0.0f});
      sums[0] += r.ce_sum;
      sums[1] += double(r.tokens);
      if (pos + 1 < pl.stages) be.copy(carried.f32(), model.output(here.chunk, 0), floats * sizeof(float));
      order_after(main, be);  // before the next send, receive or copy into it
      if (used_chunk >= 0) model.retire(used_chunk, 0);
      used_chunk = here.chunk;
    }
    if (used_chunk >= 0) model.retire(used_chunk, 0);
  }
  buffers.give(std::move(carried), main);
  g.pp->all_reduce_sum(sums);
  return {sums[0], long(sums[1])};
}

}  // namespace mt
