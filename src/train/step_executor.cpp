#include "train/step_executor.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/thread_check.hpp"
#include "model/step_statistics.hpp"

namespace mt {

using pipeline::Pass;
using pipeline::Payload;

namespace {
// A pass's region of the device counters: its kind, chunk and micro-batch.
std::string region_name(const pipeline::Task& t) {
  static const char* const kPass[] = {"forward", "backward", "input_grad", "weight_grad"};
  return std::string(kPass[int(t.pass)]) + " chunk " + std::to_string(t.chunk) + " mb " + std::to_string(t.microbatch);
}
}  // namespace

StepExecutor::StepExecutor(Model& model, const pipeline::Schedule& schedule, const ParallelGroups& g,
                           const StepPlan& plan, const FillMicroBatch& fill, const AfterForward& after_forward,
                           TransferBuffers& buffers, StepScalars& scalars)
    : model_(model), pl_(schedule.placement), g_(g), me_(g.me.pp), plan_(plan), fill_(fill),
      after_forward_(after_forward), buffers_(buffers), mailbox_(pl_, me_, *g.dev.pp, buffers),
      overlapped_time_(buffers.backend()), concurrent_(g.tp->concurrent_calls() && g.ep->concurrent_calls()),
      scalars_(scalars) {
  for (int c = 0; c < pl_.chunks_per_rank; ++c) {
    forward_time_.push_back(std::make_unique<DeviceTimer>(model.backend(c)));
    backward_time_.push_back(std::make_unique<DeviceTimer>(model.backend(c)));
    const int pos = pl_.locate(me_, c)->position;
    if (pos == 0 || pos == pl_.stages - 1) embedding_chunks_.push_back(c);
    // Free slots, the lowest last: taken from the back.
    free_slots_.emplace_back();
    for (int s = pl_.microbatches_per_flow - 1; s >= 0; --s) free_slots_.back().push_back(s);
  }
  slot_of_.assign(pl_.chunks_per_rank, std::vector<int>(pl_.microbatches_per_flow, -1));
  // The gradients a forward takes (the heads in chunks) are summed over the data-parallel ranks
  // from this thread, which every pass's gradient sums use (compute_pair).
  model_.defer_forward_close(true);
}

StepExecutor::~StepExecutor() { model_.defer_forward_close(false); }

void StepExecutor::run(const std::vector<pipeline::Step>& program) {
  // The chunks' streams start after what the device's first stream did before the step (the
  // last step's update of the weights), and it goes on after all of them (the gradient sums).
  for (int c = 0; c < pl_.chunks_per_rank; ++c) order_after(model_.backend(c), main());
  for (const pipeline::Step& step : program) {
    if (auto* c = std::get_if<pipeline::CommOp>(&step)) mailbox_.communicate(*c);
    else compute(std::get<pipeline::ComputeOp>(step));
  }
  mailbox_.finish();
  for (int c = 0; c < pl_.chunks_per_rank; ++c) order_after(main(), model_.backend(c));
  scalars_.sum_forwards();
}

void StepExecutor::read_times(StepTotals& totals) {
  for (int c = 0; c < pl_.chunks_per_rank; ++c) {
    totals.t_forward += forward_time_[c]->take_seconds();
    totals.t_backward += backward_time_[c]->take_seconds();
  }
  totals.t_overlapped = overlapped_time_.take_seconds();
  totals.t_pipeline_wait = mailbox_.take_wait_seconds();
}

// The first and last stages add into the embedding's gradient (its lookup; the MTP modules'
// and a tied head's use of it): when this rank holds both, their weight-gradient passes run on
// two streams, and each must wait for the other's earlier work instead of adding at the same time.
void StepExecutor::order_embedding_gradient(const pipeline::Task& t) {
  if (t.pass == Pass::forward || t.pass == Pass::input_grad) return;
  if (std::find(embedding_chunks_.begin(), embedding_chunks_.end(), t.chunk) == embedding_chunks_.end()) return;
  for (int other : embedding_chunks_)
    if (other != t.chunk) order_after(model_.backend(t.chunk), model_.backend(other));
}

StepExecutor::Pending StepExecutor::prepare(const pipeline::Task& t) {
  order_embedding_gradient(t);
  Pending p;
  p.task = t;
  p.loc = *pl_.locate(me_, t.chunk);
  const int pos = p.loc.position;
  const Backend& stream = model_.backend(t.chunk);
  if (t.pass == Pass::forward) {
    p.slot = free_slots_[t.chunk].back();
    free_slots_[t.chunk].pop_back();
    slot_of_[t.chunk][t.microbatch] = p.slot;
    fill_(plan_.first + p.loc.flow * pl_.microbatches_per_flow + t.microbatch, p.tokens, p.targets);
    p.sums = scalars_.forward_sums(forwards_++);
    if (pos > 0) p.input = mailbox_.take({Payload::activation, p.loc.flow, t.microbatch, pos - 1}, stream);
    return p;
  }
  p.slot = slot_of_[t.chunk][t.microbatch];
  if (t.pass != Pass::weight_grad) {
    finish_global_balance_once();
    if (!last_position(p)) p.input = mailbox_.take({Payload::gradient, p.loc.flow, t.microbatch, pos + 1}, stream);
  }
  return p;
}

void StepExecutor::execute(Pending& p, bool close_now) {
  const pipeline::Task& t = p.task;
  const float* input = p.input.data.count() ? p.input.data.f32() : nullptr;
  if (t.pass == Pass::forward) {
    const MicroBatch batch{p.tokens.data(), p.targets.data(), plan_.micro_batch};
    model_.forward(t.chunk, p.slot, batch, input, plan_.scales, &p.sums);
    if (close_now) model_.close_forward_gradients(t.chunk);
  } else {
    if (t.pass != Pass::weight_grad) model_.backward_input(t.chunk, p.slot, input, t.pass == Pass::backward);
    if (t.pass != Pass::input_grad) model_.backward_weight(t.chunk, p.slot);
  }
}

// training.cuda_graph: the pass is warmed up, captured or replayed (ops/backend/graph_capture.hpp).
void StepExecutor::execute_graphed(Pending& p) {
  const Backend& stream = model_.backend(p.task.chunk);
  if (!stream.graph) return execute(p);
  stream.graph->begin(stream, region_name(p.task));
  execute(p);
  stream.graph->end();
}

void StepExecutor::finish(Pending& p) {
  const pipeline::Task& t = p.task;
  const int pos = p.loc.position;
  const Backend& stream = model_.backend(t.chunk);
  // The pass copied its input into its arena (in its stream's order): the buffer may carry the next.
  mailbox_.release(p.input, stream);
  if (t.pass == Pass::forward) {
    if (last_position(p) && after_forward_)
      after_forward_(plan_.first + p.loc.flow * pl_.microbatches_per_flow + t.microbatch, p.slot);
    if (!last_position(p))
      mailbox_.deliver({Payload::activation, p.loc.flow, t.microbatch, pos}, stream, model_.output(t.chunk, p.slot));
    return;
  }
  if (t.pass != Pass::weight_grad && pos > 0)
    mailbox_.deliver({Payload::gradient, p.loc.flow, t.microbatch, pos}, stream, model_.input_grad(t.chunk, p.slot));
  if (t.pass != Pass::input_grad) {
    model_.retire(t.chunk, p.slot);
    free_slots_[t.chunk].push_back(p.slot);
  }
}

void StepExecutor::compute(const pipeline::ComputeOp& op) {
  if (!op.overlapped_backward) {
    Pending p = prepare(op.task);
    const CountedRegion region(main().counters, region_name(p.task));
    (p.task.pass == Pass::forward ? forward_time_ : backward_time_)[p.task.chunk]->time([&] { execute_graphed(p); });
    finish(p);
    return;
  }
  // Each chunk keeps one scratch arena and one stream: the pair's passes are of two chunks.
  if (op.task.chunk == op.overlapped_backward->chunk)
    throw std::logic_error("an overlapped pair of one chunk's passes (a schedule bug)");
  Pending f = prepare(op.task), b = prepare(*op.overlapped_backward);
  {
    const CountedRegion region(main().counters, region_name(f.task) + " with " + region_name(b.task));
    compute_pair(f, b);
  }
  finish(f);
  finish(b);
}

// An overlapped pair (DualPipe's F&B) runs its forward on a second thread while this one runs the
// backward, so either's communication inside the layers (the expert all-to-alls, tensor-parallel
// sums) proceeds while the other computes; when the communicators cannot take calls from two
// threads, one after the other. Two chunks share no layer, so their passes touch disjoint saved
// state and statistics, and each talks over its chunk's own communicators; the data-parallel one,
// which the backward's gradient sums use, takes the forward's (the heads' in chunks) from this
// thread after both (the OverlapScope makes any communicator both threads call a failure). The
// pair's time counts once, as overlapped time: from the first stream's mark before it to the mark
// after both chunks' streams are through.
void StepExecutor::compute_pair(Pending& f, Pending& b) {
  overlapped_time_.begin();
  if (concurrent_) {
    run_overlapped(f, b);
    model_.close_forward_gradients(f.task.chunk);
  } else {
    execute(f);
    execute(b);
  }
  order_after(main(), model_.backend(f.task.chunk));
  order_after(main(), model_.backend(b.task.chunk));
  overlapped_time_.end();
}

void StepExecutor::run_overlapped(Pending& f, Pending& b) {
  const OverlapScope overlap;
  std::exception_ptr failed;
  std::thread forward([&] {
    try {
      execute(f, false);
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
}

// A global-batch balance loss needs the routing of every micro-batch of the step through a
// layer before any backward pass through it (only all-forward-all-backward schedules allow it).
void StepExecutor::finish_global_balance_once() {
  if (balance_done_ || !plan_.global_balance) return;
  balance_done_ = true;
  sum_token_shares(model_, *g_.dev.tp);
  sum_step_statistics(model_, *g_.dev.dp);
  finish_global_balance(model_, long(plan_.global_batch) * model_.config().seq_len,
                        scalars_.at(StepScalars::global_aux));
}

}  // namespace mt
