// Schedule checker: task counts, data availability in program order, send/receive matching,
// messages matched in order on each link, and a deadlock search under blocking point-to-point
// semantics.
#include "pipeline/check.hpp"

#include <map>
#include <set>
#include <tuple>

namespace mt::pipeline {

namespace {

using Key = std::tuple<int, int, int>;  // flow, micro-batch, position

std::string where(int rank, size_t step) {
  return "rank " + std::to_string(rank) + " step " + std::to_string(step);
}

std::string key_text(const Key& k) {
  return "flow " + std::to_string(std::get<0>(k)) + " micro-batch " + std::to_string(std::get<1>(k)) +
         " position " + std::to_string(std::get<2>(k));
}

// What one rank holds so far, in program order.
struct RankState {
  std::set<Key> forwarded, input_grads_done, weights_done;
  std::set<Key> activations, gradients;  // keyed by the producing position
};

using TransferId = std::tuple<int, int, Key, Payload>;  // source rank, destination rank, what

struct Counts {
  int forward = 0, backward = 0, input_grad = 0, weight_grad = 0;
};

class Checker {
 public:
  explicit Checker(const Schedule& s) : s_(s), pl_(s.placement) {}

  std::vector<std::string> run() {
    if (static_cast<int>(s_.ranks.size()) != pl_.ranks)
      problem("the schedule has " + std::to_string(s_.ranks.size()) + " rank programs for pp=" +
              std::to_string(pl_.ranks));
    else
      for (int r = 0; r < pl_.ranks; ++r) walk_rank(r);
    check_counts();
    bool matched = check_matching();
    if (matched) check_link_order();
    if (matched && problems_.empty()) check_deadlock();
    return problems_;
  }

 private:
  void problem(std::string text) { problems_.push_back(std::move(text)); }

  void walk_rank(int r) {
    RankState st;
    const auto& steps = s_.ranks[r];
    for (size_t i = 0; i < steps.size(); ++i) {
      if (const auto* op = std::get_if<ComputeOp>(&steps[i])) {
        std::vector<Task> tasks = tasks_of(*op);
        std::vector<Key> keys;
        for (const Task& t : tasks) {
          auto loc = pl_.locate(r, t.chunk);
          if (!loc || t.microbatch < 0 || t.microbatch >= pl_.microbatches_per_flow) {
            problem(where(r, i) + " (" + op_text(*op) + "): rank " + std::to_string(r) +
                    " has no chunk " + std::to_string(t.chunk) + " or no micro-batch " + std::to_string(t.microbatch));
            keys.push_back({-1, -1, -1});
            continue;
          }
          keys.push_back({loc->flow, t.microbatch, loc->position});
          require_inputs(r, i, *op, t, keys.back(), st);
        }
        for (size_t k = 0; k < tasks.size(); ++k)
          if (std::get<0>(keys[k]) >= 0) record(tasks[k], keys[k], st);
      } else {
        walk_comm(r, i, std::get<CommOp>(steps[i]), st);
      }
    }
  }

  void require_inputs(int r, size_t i, const ComputeOp& op, const Task& t, const Key& k, const RankState& st) {
    auto [flow, mb, pos] = k;
    std::string at = where(r, i) + " (" + op_text(op) + ")";
    switch (t.pass) {
      case Pass::forward:
        if (pos > 0 && !st.activations.count({flow, mb, pos - 1}))
          problem(at + ": forward of " + key_text(k) + " runs before its input activation arrived");
        break;
      case Pass::backward:
      case Pass::input_grad:
        if (!st.forwarded.count(k)) problem(at + ": backward of " + key_text(k) + " runs before its forward");
        if (pos + 1 < pl_.stages && !st.gradients.count({flow, mb, pos + 1}))
          problem(at + ": backward of " + key_text(k) + " runs before its output gradient arrived");
        break;
      case Pass::weight_grad:
        if (!st.input_grads_done.count(k))
          problem(at + ": weight gradient of " + key_text(k) + " runs before its input-gradient part");
        break;
    }
  }

  void record(const Task& t, const Key& k, RankState& st) {
    Counts& c = counts_[k];
    switch (t.pass) {
      case Pass::forward: ++c.forward; st.forwarded.insert(k); st.activations.insert(k); break;
      case Pass::backward: ++c.backward; st.gradients.insert(k); break;
      case Pass::input_grad: ++c.input_grad; st.input_grads_done.insert(k); st.gradients.insert(k); break;
      case Pass::weight_grad: ++c.weight_grad; st.weights_done.insert(k); break;
    }
  }

  void walk_comm(int r, size_t i, const CommOp& c, RankState& st) {
    const Transfer& t = c.transfer;
    std::string at = where(r, i) + " (" + comm_text(c) + ")";
    int to = receiving_position(t);
    if (t.flow < 0 || t.flow >= pl_.flows || t.position < 0 || t.position >= pl_.stages || to < 0 || to >= pl_.stages) {
      problem(at + ": no such position in this pipeline");
      return;
    }
    int src = pl_.slot(t.flow, t.position).rank, dst = pl_.slot(t.flow, to).rank;
    Key k{t.flow, t.microbatch, t.position};
    bool sending = c.kind == CommKind::send;
    if (r != (sending ? src : dst) || c.peer != (sending ? dst : src))
      problem(at + ": this transfer goes from rank " + std::to_string(src) + " to rank " + std::to_string(dst));
    TransferId id{src, dst, k, t.payload};
    switch (c.kind) {
      case CommKind::send: {
        bool produced = t.payload == Payload::activation ? st.activations.count(k) : st.gradients.count(k);
        if (!produced) problem(at + ": sent before the rank produced it");
        sends_[id].push_back({r, i});
        link_sends_[{src, dst}].push_back(id);
        break;
      }
      case CommKind::post_recv:
        posts_[id].push_back({r, i});
        link_posts_[{src, dst}].push_back(id);
        break;
      case CommKind::wait_recv:
        if (!posts_.count(id)) problem(at + ": waits for a receive it never posted");
        (t.payload == Payload::activation ? st.activations : st.gradients).insert(k);
        waits_[id].push_back({r, i});
        break;
    }
  }

  void check_counts() {
    for (int f = 0; f < pl_.flows; ++f)
      for (int m = 0; m < pl_.microbatches_per_flow; ++m)
        for (int p = 0; p < pl_.stages; ++p) {
          Key k{f, m, p};
          Counts c = counts_.count(k) ? counts_.at(k) : Counts{};
          std::string who = key_text(k) + " (rank " + std::to_string(pl_.slot(f, p).rank) + ")";
          if (c.forward != 1) problem(who + " has " + std::to_string(c.forward) + " forwards; it needs exactly 1");
          bool full = c.backward == 1 && c.input_grad == 0 && c.weight_grad == 0;
          bool split = c.backward == 0 && c.input_grad == 1 && c.weight_grad == 1;
          if (!full && !split)
            problem(who + " has " + std::to_string(c.backward) + " B, " + std::to_string(c.input_grad) + " I and " +
                    std::to_string(c.weight_grad) + " W; it needs one B, or one I and one W");
        }
  }

  // Every transfer needs exactly one send, one posted receive and one wait.
  bool check_matching() {
    std::set<TransferId> all;
    for (const auto* m : {&sends_, &posts_, &waits_})
      for (const auto& [id, places] : *m) all.insert(id);
    bool ok = true;
    for (const TransferId& id : all) {
      auto n = [&](const Places& m) { return m.count(id) ? m.at(id).size() : 0; };
      if (n(sends_) == 1 && n(posts_) == 1 && n(waits_) == 1) continue;
      ok = false;
      const auto& [src, dst, k, payload] = id;
      problem(std::string(payload == Payload::activation ? "activation" : "gradient") + " of " + key_text(k) +
              " from rank " + std::to_string(src) + " to rank " + std::to_string(dst) + ": " +
              std::to_string(n(sends_)) + " sends on rank " + std::to_string(src) + ", " + std::to_string(n(posts_)) +
              " posted receives and " + std::to_string(n(waits_)) + " waits on rank " + std::to_string(dst) +
              "; it needs exactly one of each");
    }
    return ok;
  }

  // Messages between two ranks match in the order they were posted (NCCL has no tags), so a rank
  // posts its receives from a peer in the order the peer sends.
  void check_link_order() {
    for (const auto& [link, sent] : link_sends_) {
      const std::vector<TransferId>& posted = link_posts_[link];
      for (size_t n = 0; n < sent.size() && n < posted.size(); ++n) {
        if (sent[n] == posted[n]) continue;
        problem("rank " + std::to_string(link.second) + " posts its receives from rank " + std::to_string(link.first) +
                " out of the order they are sent: message " + std::to_string(n) + " sent is " + id_text(sent[n]) +
                ", the receive posted for it is for " + id_text(posted[n]));
        break;
      }
    }
  }

  static std::string id_text(const TransferId& id) {
    return std::string(std::get<3>(id) == Payload::activation ? "the activation" : "the gradient") + " of " +
           key_text(std::get<2>(id));
  }

  // Run the programs with blocking semantics: a posted receive never blocks; a send blocks
  // until the receiver has posted; a wait blocks until the sender has sent. Advance every rank
  // that can until none can; a rank left unfinished is deadlocked.
  void check_deadlock() {
    std::vector<size_t> pc(pl_.ranks, 0);
    auto blocked_on = [&](int r) -> const CommOp* {
      const auto* c = std::get_if<CommOp>(&s_.ranks[r][pc[r]]);
      if (!c || c->kind == CommKind::post_recv) return nullptr;
      const Transfer& t = c->transfer;
      int to = receiving_position(t);
      TransferId id{pl_.slot(t.flow, t.position).rank, pl_.slot(t.flow, to).rank, {t.flow, t.microbatch, t.position},
                    t.payload};
      size_t partner = (c->kind == CommKind::send ? posts_ : sends_).at(id)[0].second;
      return pc[c->peer] > partner ? nullptr : c;
    };
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < pl_.ranks; ++r)
        while (pc[r] < s_.ranks[r].size() && !blocked_on(r)) {
          ++pc[r];
          progress = true;
        }
    }
    for (int r = 0; r < pl_.ranks; ++r)
      if (pc[r] < s_.ranks[r].size())
        problem(where(r, pc[r]) + " deadlocks: it blocks to " + comm_text(*blocked_on(r)) + ", but rank " +
                std::to_string(blocked_on(r)->peer) + " is itself blocked at its step " +
                std::to_string(pc[blocked_on(r)->peer]));
  }

  const Schedule& s_;
  const Placement& pl_;
  std::vector<std::string> problems_;
  std::map<Key, Counts> counts_;
  using Places = std::map<TransferId, std::vector<std::pair<int, size_t>>>;
  Places sends_, posts_, waits_;
  std::map<std::pair<int, int>, std::vector<TransferId>> link_sends_, link_posts_;  // by (source, destination)
};

}  // namespace

std::vector<std::string> check_schedule(const Schedule& s) { return Checker(s).run(); }

}  // namespace mt::pipeline
