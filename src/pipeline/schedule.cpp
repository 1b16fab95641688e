// Schedule vocabulary: kind names, placement of positions on ranks, operation text, and the
// exchanges implied by a compute order.
#include "pipeline/schedule.hpp"

#include <cctype>

#include "util/error.hpp"

namespace mt::pipeline {

const std::vector<std::string>& kind_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, kind] : Names<Kind>::list) out.push_back(name);
    return out;
  }();
  return names;
}

std::string kind_name(Kind kind) { return name_of(kind); }

Kind parse_kind(const std::string& name) {
  Kind kind;
  if (value_of(name, kind)) return kind;
  std::string valid;
  for (const auto& n : kind_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw UserError("unknown schedule kind '" + name + "': valid kinds are " + valid);
}

Slot Placement::slot(int flow, int position) const {
  switch (kind) {
    case Kind::interleaved: return {position % ranks, position / ranks};
    case Kind::dualpipe: return flow == 0 ? Slot{position, 0} : Slot{ranks - 1 - position, 1};
    case Kind::dualpipev: return position < ranks ? Slot{position, 0} : Slot{2 * ranks - 1 - position, 1};
    default: return {position, 0};
  }
}

std::optional<Location> Placement::locate(int rank, int chunk) const {
  if (rank < 0 || rank >= ranks || chunk < 0 || chunk >= chunks_per_rank) return std::nullopt;
  switch (kind) {
    case Kind::interleaved: return Location{0, chunk * ranks + rank};
    case Kind::dualpipe: return chunk == 0 ? Location{0, rank} : Location{1, ranks - 1 - rank};
    case Kind::dualpipev: return Location{0, chunk == 0 ? rank : 2 * ranks - 1 - rank};
    default: return Location{0, rank};
  }
}

namespace {

char pass_letter(Pass p) {
  switch (p) {
    case Pass::forward: return 'F';
    case Pass::backward: return 'B';
    case Pass::input_grad: return 'I';
    case Pass::weight_grad: return 'W';
  }
  return '?';
}

std::string task_text(const Task& t) {
  return pass_letter(t.pass) + std::to_string(t.chunk) + "." + std::to_string(t.microbatch);
}

std::optional<Task> parse_task(const std::string& s) {
  if (s.size() < 4) return std::nullopt;
  Task t{};
  switch (s[0]) {
    case 'F': t.pass = Pass::forward; break;
    case 'B': t.pass = Pass::backward; break;
    case 'I': t.pass = Pass::input_grad; break;
    case 'W': t.pass = Pass::weight_grad; break;
    default: return std::nullopt;
  }
  size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 1 || dot + 1 == s.size()) return std::nullopt;
  for (size_t i = 1; i < s.size(); ++i)
    if (i != dot && !std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
  t.chunk = std::stoi(s.substr(1, dot - 1));
  t.microbatch = std::stoi(s.substr(dot + 1));
  return t;
}

}  // namespace

std::string op_text(const ComputeOp& op) {
  std::string s = task_text(op.task);
  if (op.overlapped_backward) {
    s += '&';
    s += task_text(*op.overlapped_backward);
  }
  return s;
}

std::string comm_text(const CommOp& op) {
  const Transfer& t = op.transfer;
  static const char* verb[] = {"send ", "post receive of ", "wait for "};
  return std::string(verb[static_cast<int>(op.kind)]) +
         (t.payload == Payload::activation ? "activation" : "gradient") + " of flow " + std::to_string(t.flow) +
         " micro-batch " + std::to_string(t.microbatch) + " from position " + std::to_string(t.position) +
         (op.kind == CommKind::send ? " to rank " : " from rank ") + std::to_string(op.peer);
}

std::optional<ComputeOp> parse_op(const std::string& text) {
  size_t amp = text.find('&');
  auto first = parse_task(text.substr(0, amp));
  if (!first) return std::nullopt;
  ComputeOp op{*first, std::nullopt};
  if (amp != std::string::npos) {
    auto second = parse_task(text.substr(amp + 1));
    if (!second || first->pass != Pass::forward || second->pass != Pass::backward) return std::nullopt;
    op.overlapped_backward = second;
  }
  return op;
}

std::vector<std::vector<ComputeOp>> compute_order(const Schedule& s) {
  std::vector<std::vector<ComputeOp>> order(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (const Step& step : s.ranks[r])
      if (auto* op = std::get_if<ComputeOp>(&step)) order[r].push_back(*op);
  return order;
}

std::vector<Task> tasks_of(const ComputeOp& op) {
  std::vector<Task> t{op.task};
  if (op.overlapped_backward) t.push_back(*op.overlapped_backward);
  return t;
}

}  // namespace mt::pipeline
