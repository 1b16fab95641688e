// Pipeline schedules: the generators against the published orders and bubble formulas, the
// checker against hand-broken schedules, the simulator's timing rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "pipeline/check.hpp"
#include "pipeline/generators.hpp"
#include "pipeline/published.hpp"
#include "pipeline/simulate.hpp"
#include "test_helpers.hpp"

using namespace mt::pipeline;
using testing::contains;
using testing::user_error_of;

namespace {

Schedule make(Kind kind, int pp, int m, int vpp = 1) { return make_schedule({kind, pp, m, vpp}); }

std::vector<std::string> texts(const std::vector<ComputeOp>& ops) {
  std::vector<std::string> t;
  for (const auto& op : ops) t.push_back(op_text(op));
  return t;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// Same rank order with the two chunks exchanged: DualPipe's rank pp-1-r mirrors rank r.
std::vector<std::string> swap_chunks(const std::vector<std::string>& ops) {
  std::vector<std::string> out;
  for (std::string op : ops) {
    for (size_t i = 0; i < op.size(); ++i)
      if ((op[i] == '0' || op[i] == '1') && i > 0 && std::isalpha(static_cast<unsigned char>(op[i - 1])))
        op[i] = op[i] == '0' ? '1' : '0';
    out.push_back(op);
  }
  return out;
}

Costs uniform(double fb) {
  Costs c;
  c.forward = c.input_grad = c.weight_grad = 1;
  c.backward = 2;
  c.overlapped = fb;
  return c;
}

std::vector<Kind> all_kinds() {
  return {Kind::gpipe, Kind::one_f_one_b, Kind::interleaved, Kind::zb_h1, Kind::dualpipe, Kind::dualpipev};
}

size_t index_of(const std::vector<Step>& prog, const std::function<bool(const Step&)>& pred) {
  for (size_t i = 0; i < prog.size(); ++i)
    if (pred(prog[i])) return i;
  FAIL("step not found");
  return 0;
}

bool is_comm(const Step& s, CommKind kind, Payload payload, int microbatch) {
  const auto* c = std::get_if<CommOp>(&s);
  return c && c->kind == kind && c->transfer.payload == payload && c->transfer.microbatch == microbatch;
}

bool any_contains(const std::vector<std::string>& problems, const std::string& part) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return contains(p, part); });
}

}  // namespace

// The DualPipe reference implementation's step() replayed for PP=8 and 20 micro-batches
// (reference/deepseek_v3.md §1.4, abbreviations written out; b = input-gradient backward).
TEST_CASE("dualpipe pp=8 m=20 reproduces the reference per-rank order") {
  const std::vector<std::string> reference = {
      "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 b1.0 W1.0 F1.1 b1.1 W1.1 F1.2 b1.2 W1.2 F1.3 "
      "F0.7&B1.3 F1.4&B0.0 F0.8&B1.4 F1.5&B0.1 F0.9&B1.5 F1.6&B0.2 "
      "B1.6 F1.7&B0.3 B1.7 F1.8&B0.4 B1.8 F1.9&B0.5 B1.9 b0.6 W0.6 b0.7 W0.7 b0.8 W0.8 b0.9 W0.9",
      "F0.0 F0.1 F0.2 F0.3 F0.4 F1.0 F0.5 F1.1 b1.0 W1.0 F1.2 b1.1 W1.1 F1.3 "
      "F0.6&B1.2 F1.4&B0.0 F0.7&B1.3 F1.5&B0.1 F0.8&B1.4 F1.6&B0.2 F0.9&B1.5 F1.7&B0.3 "
      "B1.6 F1.8&B0.4 B1.7 F1.9&B0.5 B1.8 B0.6 b1.9 b0.7 W1.9 b0.8 W0.7 b0.9 W0.8 W0.9",
      "F0.0 F0.1 F0.2 F1.0 F0.3 F1.1 F0.4 F1.2 b1.0 W1.0 F1.3 "
      "F0.5&B1.1 F1.4&B0.0 F0.6&B1.2 F1.5&B0.1 F0.7&B1.3 F1.6&B0.2 F0.8&B1.4 F1.7&B0.3 F0.9&B1.5 F1.8&B0.4 "
      "B1.6 F1.9&B0.5 B1.7 B0.6 B1.8 b0.7 b1.9 b0.8 W0.7 b0.9 W1.9 W0.8 W0.9",
      "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 F0.4 B1.0 "
      "F1.4&B0.0 F0.5&B1.1 F1.5&B0.1 F0.6&B1.2 F1.6&B0.2 F0.7&B1.3 F1.7&B0.3 F0.8&B1.4 F1.8&B0.4 F0.9&B1.5 "
      "F1.9&B0.5 B1.6 B0.6 B1.7 B0.7 b1.8 b0.8 b1.9 b0.9 W1.8 W0.8 W1.9 W0.9",
  };
  auto to_ours = [](std::string s) {
    std::replace(s.begin(), s.end(), 'b', 'I');
    return words(s);
  };
  auto order = compute_order(make(Kind::dualpipe, 8, 20));
  REQUIRE(order.size() == 8);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(texts(order[r]) == to_ours(reference[r]));
    CHECK(texts(order[7 - r]) == swap_chunks(to_ours(reference[r])));
  }
  // DualPipeV on 4 ranks with 10 micro-batches runs the same sequences (chunk 0 = first leg).
  auto v = compute_order(make(Kind::dualpipev, 4, 10));
  for (int r = 0; r < 4; ++r) CHECK(texts(v[r]) == to_ours(reference[r]));
}

TEST_CASE("every generated schedule passes the checker") {
  for (Kind kind : all_kinds())
    for (int pp = 1; pp <= 8; ++pp)
      for (int m = 1; m <= 3 * pp + 2; ++m)
        for (int vpp : {1, 2, 3}) {
          ScheduleRequest req{kind, pp, m, vpp};
          if (!user_error_of([&] { validate_request(req); }).empty()) continue;
          CAPTURE(kind_name(kind));
          CAPTURE(pp);
          CAPTURE(m);
          CAPTURE(vpp);
          Schedule s = make_schedule(req);
          auto problems = check_schedule(s);
          CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems[0]));
        }
}

TEST_CASE("simulated bubbles equal the published formulas at uniform costs") {
  // Uniform as in the published figures: F = I = W, B = I + W; the overlapped pair costs
  // between B and F + B.
  for (double fb : {2.0, 2.5, 3.0})
    for (int pp : {2, 4, 6, 8, 16})
      for (int factor : {2, 3, 5}) {
        const int m = factor * pp;
        const Costs c = uniform(fb);
        CAPTURE(fb);
        CAPTURE(pp);
        CAPTURE(m);
        for (Kind kind : {Kind::gpipe, Kind::one_f_one_b, Kind::zb_h1, Kind::dualpipe}) {
          CAPTURE(kind_name(kind));
          Timeline tl = simulate(make(kind, pp, m), c);
          CHECK(tl.max_bubble() == doctest::Approx(published_bubble(kind, pp, c).value));
        }
        // DualPipeV with pp ranks holds PP = 2*pp stages.
        Timeline v = simulate(make(Kind::dualpipev, pp, m), c);
        CHECK(v.max_bubble() == doctest::Approx((pp - 1) * (fb + 2 - 3)));
        // Interleaved: with per-chunk costs the bubble is (p-1)/(v*m) of the ideal time.
        for (int vpp : {2, 4}) {
          Timeline tl = simulate(make(Kind::interleaved, pp, m, vpp), c);
          double ideal = m * vpp * (c.forward + c.backward);
          CHECK(tl.max_bubble() / ideal == doctest::Approx(double(pp - 1) / (vpp * m)));
        }
      }
}

TEST_CASE("1F1B, GPipe and interleaved bubbles hold for any costs; ZB-H1 and DualPipe pinned where the formulas stop") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> cost(1, 9);
  for (int trial = 0; trial < 40; ++trial) {
    Costs c;
    c.forward = cost(rng);
    c.input_grad = cost(rng);
    c.weight_grad = cost(rng);
    c.backward = c.input_grad + c.weight_grad;
    c.overlapped = c.forward + c.backward;
    const int pp = 2 + trial % 7, m = pp * (2 + trial % 3);
    CAPTURE(trial);
    for (Kind kind : {Kind::gpipe, Kind::one_f_one_b}) {
      Timeline tl = simulate(make(kind, pp, m), c);
      for (double b : tl.bubble) CHECK(b == doctest::Approx((pp - 1) * (c.forward + c.backward)));
    }
    Timeline il = simulate(make(Kind::interleaved, pp, m, 2), c);
    CHECK(il.max_bubble() == doctest::Approx((pp - 1) * (c.forward + c.backward)));
    // ZB-H1 keeps 1F1B's memory, so the I chain and the F chain bound it from below:
    // (p-1)(F+B-2W) = (p-1)(F+I-W) holds while W <= min(F, I), (p-1)max(F, I) beyond.
    Timeline zb = simulate(make(Kind::zb_h1, pp, m), c);
    double expect = (pp - 1) * std::max({c.forward + c.input_grad - c.weight_grad, c.forward, c.input_grad});
    CHECK(zb.max_bubble() == doctest::Approx(expect));
  }
  // A forward-heavy DualPipe: the warm-up forward chain dominates and the formula undercounts.
  Costs heavy;
  heavy.forward = 9;
  heavy.input_grad = 4;
  heavy.weight_grad = 3;
  heavy.backward = 7;
  heavy.overlapped = 12;
  CHECK(published_bubble(Kind::dualpipe, 8, heavy).value == doctest::Approx(30));
  CHECK(simulate(make(Kind::dualpipe, 8, 20), heavy).max_bubble() == doctest::Approx(45));
}

TEST_CASE("peak live activations: PP for 1F1B and ZB-H1, PP+1 for DualPipe, 2N+1 for DualPipeV, m for GPipe") {
  for (int pp : {2, 4, 8, 16})
    for (int factor : {2, 4}) {
      const int m = factor * pp;
      CAPTURE(pp);
      CAPTURE(m);
      auto peak = [](const Schedule& s) { return simulate(s, Costs{}).peak_activations; };
      CHECK(peak(make(Kind::one_f_one_b, pp, m))[0] == pp);
      auto zb = peak(make(Kind::zb_h1, pp, m));
      CHECK(*std::max_element(zb.begin(), zb.end()) == pp);
      for (int p : peak(make(Kind::dualpipe, pp, m))) CHECK(p == pp + 1);
      for (int p : peak(make(Kind::dualpipev, pp, m))) CHECK(p == 2 * pp + 1);
      for (int p : peak(make(Kind::gpipe, pp, m))) CHECK(p == m);
    }
}

TEST_CASE("point-to-point latency: GPipe pays it twice per stage boundary, 1F1B also in its steady state") {
  Costs c;
  c.latency = 0.25;
  for (int pp : {2, 4, 8}) {
    CAPTURE(pp);
    auto delay = [&](Kind k) {
      return simulate(make(k, pp, 3 * pp), c).makespan - simulate(make(k, pp, 3 * pp), Costs{}).makespan;
    };
    // All forwards stream down and all backwards stream up: one latency per hop each way.
    CHECK(delay(Kind::gpipe) == doctest::Approx(2 * (pp - 1) * c.latency));
    // 1F1B's steady state waits on a round trip between neighbours, so latency repeats there.
    CHECK(delay(Kind::one_f_one_b) > 2 * (pp - 1) * c.latency);
  }
  // DualPipeV's turn at the last rank is local: with one rank there is nothing to wait for.
  CHECK(simulate(make(Kind::dualpipev, 1, 4), c).makespan == simulate(make(Kind::dualpipev, 1, 4), Costs{}).makespan);
}

TEST_CASE("checker rejects a missing receive") {
  Schedule s = make(Kind::one_f_one_b, 4, 8);
  auto& prog = s.ranks[2];
  prog.erase(prog.begin() + index_of(prog, [](const Step& st) {
               return is_comm(st, CommKind::wait_recv, Payload::activation, 3);
             }));
  prog.erase(prog.begin() + index_of(prog, [](const Step& st) {
               return is_comm(st, CommKind::post_recv, Payload::activation, 3);
             }));
  auto problems = check_schedule(s);
  CHECK(any_contains(problems, "runs before its input activation arrived"));
  CHECK(any_contains(problems, "1 sends on rank 1, 0 posted receives and 0 waits on rank 2"));
}

TEST_CASE("checker rejects receives posted out of the order their sender sends") {
  // GPipe on two ranks, rank 1 posting micro-batch 1's receive first: every check by transfer
  // passes (a posted receive may move earlier), but NCCL would match micro-batch 0's message to
  // micro-batch 1's buffer.
  Schedule s = make(Kind::gpipe, 2, 2);
  CHECK(check_schedule(s).empty());
  auto& prog = s.ranks[1];
  auto post = [&](int mb) {
    return index_of(prog, [&](const Step& st) { return is_comm(st, CommKind::post_recv, Payload::activation, mb); });
  };
  const Step early = prog[post(1)];
  prog.erase(prog.begin() + post(1));
  prog.insert(prog.begin() + post(0), early);
  auto problems = check_schedule(s);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "rank 1 posts its receives from rank 0 out of the order they are sent: message 0 sent is the "
                       "activation of flow 0 micro-batch 0 position 0, the receive posted for it is for the activation "
                       "of flow 0 micro-batch 1 position 0");
}

TEST_CASE("checker rejects a backward before its forward") {
  Schedule s = make(Kind::one_f_one_b, 4, 8);
  auto& prog = s.ranks[3];  // the last rank runs F0.m then B0.m
  size_t f = index_of(prog, [](const Step& st) {
    auto* op = std::get_if<ComputeOp>(&st);
    return op && op->task.pass == Pass::forward && op->task.microbatch == 2;
  });
  size_t b = index_of(prog, [](const Step& st) {
    auto* op = std::get_if<ComputeOp>(&st);
    return op && op->task.pass == Pass::backward && op->task.microbatch == 2;
  });
  std::swap(prog[f], prog[b]);
  auto problems = check_schedule(s);
  CHECK(any_contains(problems, "rank 3 step " + std::to_string(f) + " (B0.2): backward of flow 0 micro-batch 2 "
                               "position 3 runs before its forward"));
}

TEST_CASE("checker finds a communication cycle that every other check accepts") {
  // GPipe on two ranks: rank 0 now waits for micro-batch 0's gradient before it sends
  // micro-batch 1's activation, which rank 1 needs before it can run any backward.
  Schedule s = make(Kind::gpipe, 2, 2);
  auto& prog = s.ranks[0];
  auto take = [&](CommKind kind) {
    size_t i = index_of(prog, [&](const Step& st) { return is_comm(st, kind, Payload::gradient, 0); });
    Step step = prog[i];
    prog.erase(prog.begin() + i);
    return step;
  };
  Step post = take(CommKind::post_recv), wait = take(CommKind::wait_recv);
  size_t send = index_of(prog, [](const Step& st) { return is_comm(st, CommKind::send, Payload::activation, 1); });
  prog.insert(prog.begin() + send, {post, wait});
  auto problems = check_schedule(s);
  REQUIRE(problems.size() == 2);
  CHECK(contains(problems[0], "rank 0 step"));
  CHECK(contains(problems[0], "deadlocks: it blocks to wait for gradient of flow 0 micro-batch 0"));
  CHECK(contains(problems[1], "rank 1 step"));
  CHECK(contains(problems[1], "deadlocks"));
  // The unbroken schedule is accepted.
  CHECK(check_schedule(make(Kind::gpipe, 2, 2)).empty());
}

TEST_CASE("checker rejects duplicated, misplaced and premature work") {
  Schedule dup = make(Kind::gpipe, 2, 2);
  dup.ranks[0].push_back(ComputeOp{Task{Pass::forward, 0, 1}, std::nullopt});
  CHECK(any_contains(check_schedule(dup), "flow 0 micro-batch 1 position 0 (rank 0) has 2 forwards"));

  Schedule wrong_chunk = make(Kind::one_f_one_b, 2, 2);
  std::get<ComputeOp>(wrong_chunk.ranks[0][0]).task.chunk = 1;
  CHECK(any_contains(check_schedule(wrong_chunk), "rank 0 has no chunk 1"));

  Schedule early_w = make(Kind::zb_h1, 2, 4);
  auto& prog = early_w.ranks[1];
  size_t w = index_of(prog, [](const Step& st) {
    auto* op = std::get_if<ComputeOp>(&st);
    return op && op->task.pass == Pass::weight_grad;
  });
  prog.insert(prog.begin(), prog[w]);
  prog.erase(prog.begin() + w + 1);
  CHECK(any_contains(check_schedule(early_w), "runs before its input-gradient part"));
}

TEST_CASE("requests that break a schedule's constraints are refused with what would fit") {
  auto err = [](Kind k, int pp, int m, int vpp = 1) { return user_error_of([&] { make_schedule({k, pp, m, vpp}); }); };
  CHECK(contains(err(Kind::dualpipe, 6, 11), "even number of micro-batches, at least 2*pp = 12"));
  CHECK(contains(err(Kind::dualpipe, 6, 11), "use 12"));
  CHECK(contains(err(Kind::dualpipe, 4, 6), "use 8"));
  CHECK(contains(err(Kind::dualpipe, 5, 20), "even pp"));
  CHECK(contains(err(Kind::dualpipev, 3, 5), "at least 2*pp = 6"));
  CHECK(contains(err(Kind::interleaved, 4, 10, 2), "multiple of pp: use 12"));
  CHECK(contains(err(Kind::interleaved, 4, 8, 1), "vpp >= 2"));
  CHECK(contains(err(Kind::one_f_one_b, 4, 8, 2), "vpp applies only to the interleaved schedule"));
  CHECK(contains(err(Kind::gpipe, 0, 8), "pp must be at least 1"));
  CHECK(contains(user_error_of([] { parse_kind("zb"); }), "valid kinds are gpipe, 1f1b, interleaved, zb-h1"));
  CHECK(err(Kind::dualpipe, 6, 12).empty());
}

TEST_CASE("operation text round-trips") {
  for (Kind kind : all_kinds())
    for (const auto& ops : compute_order(make(kind, 4, 8, kind == Kind::interleaved ? 2 : 1)))
      for (const ComputeOp& op : ops) {
        auto back = parse_op(op_text(op));
        REQUIRE(back.has_value());
        CHECK(op_text(*back) == op_text(op));
      }
  CHECK_FALSE(parse_op("X0.1").has_value());
  CHECK_FALSE(parse_op("F0").has_value());
  CHECK_FALSE(parse_op("B0.1&F1.2").has_value());
}
