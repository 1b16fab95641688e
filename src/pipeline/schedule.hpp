#pragma once
// A pipeline schedule as data: for each rank, the ordered compute operations on its model
// chunks and the point-to-point exchanges between them. Generators (generators.hpp) build the
// compute order; attach_transfers() adds the exchanges; check.hpp validates a schedule,
// simulate.hpp times it and draw_svg.hpp draws it. The executor runs the same data.
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "pipeline/kind.hpp"

namespace mt::pipeline {

// The names used on the command line and in configs (Names<Kind>), in Kind order.
const std::vector<std::string>& kind_names();
std::string kind_name(Kind kind);
// Throws UserError naming the valid kinds.
Kind parse_kind(const std::string& name);

// forward; full backward; the input-gradient half of a split backward; the weight-gradient
// half, deferred to a later W operation.
enum class Pass { forward, backward, input_grad, weight_grad };

struct Task {
  Pass pass;
  int chunk;       // which of the rank's model chunks
  int microbatch;  // numbered per flow (DualPipe's two directions each count from 0)
};

// One compute operation: a task, or a forward overlapped with a full backward (DualPipe's F&B).
struct ComputeOp {
  Task task;
  std::optional<Task> overlapped_backward;
};

// Where a micro-batch flows. Every micro-batch of a flow visits positions 0..stages-1 in order
// (position = model stage); each position lives on one (rank, chunk). DualPipe has two flows
// (its two directions), every other kind one.
struct Slot {
  int rank;
  int chunk;
};
struct Location {
  int flow;
  int position;
};

struct Placement {
  Kind kind;
  int ranks;
  int chunks_per_rank;
  int flows;
  int stages;                  // positions per flow
  int microbatches_per_flow;

  Slot slot(int flow, int position) const;
  // Which flow a rank's chunk serves and at which position; nullopt for a chunk the rank lacks.
  std::optional<Location> locate(int rank, int chunk) const;
};

// What crosses between ranks: the activation leaving `position` (to position+1) or the
// gradient leaving `position` (to position-1), for one micro-batch of one flow.
enum class Payload { activation, gradient };
struct Transfer {
  Payload payload;
  int flow;
  int microbatch;
  int position;  // the sending position
  bool operator==(const Transfer&) const = default;
};

// Point-to-point operations as an MPI or NCCL executor issues them. A receive is posted early
// (non-blocking, a buffer waiting), then waited for right before the operation that needs the
// data. A send blocks until the receiver has posted the matching receive (rendezvous: the worst
// case for blocking sends).
enum class CommKind { send, post_recv, wait_recv };
// The position a transfer goes to: activations move down the flow, gradients up.
inline int receiving_position(const Transfer& t) {
  return t.payload == Payload::activation ? t.position + 1 : t.position - 1;
}

// A transfer as an ordered key (maps of transfers in flight).
using TransferKey = std::tuple<int, int, int, int>;  // payload, flow, micro-batch, sending position
inline TransferKey key_of(const Transfer& t) { return {static_cast<int>(t.payload), t.flow, t.microbatch, t.position}; }

struct CommOp {
  CommKind kind;
  int peer;
  Transfer transfer;
};

// A rank's program: compute and communication operations, run one after the other.
using Step = std::variant<ComputeOp, CommOp>;

struct Schedule {
  Kind kind;
  int pp;
  int vpp;           // chunks per rank for interleaved; 1 otherwise (DualPipe's 2 are in placement)
  int microbatches;  // in total, over both directions for DualPipe
  Placement placement;
  std::vector<std::vector<Step>> ranks;
};

// The one or two tasks of an operation.
std::vector<Task> tasks_of(const ComputeOp& op);
// The same without allocating, for hot loops: f(task) for each.
template <class F>
void for_each_task(const ComputeOp& op, F&& f) {
  f(op.task);
  if (op.overlapped_backward) f(*op.overlapped_backward);
}

// Operation text as in the JSON output: F<c>.<m>, B<c>.<m>, I<c>.<m>, W<c>.<m>, F<c>.<m>&B<c'>.<m'>.
std::string op_text(const ComputeOp& op);
std::string comm_text(const CommOp& op);
// Inverse of op_text; nullopt when the text is not an operation.
std::optional<ComputeOp> parse_op(const std::string& text);

// The compute operations of each rank, in order, without exchanges.
std::vector<std::vector<ComputeOp>> compute_order(const Schedule& s);


}  // namespace mt::pipeline
