// The MoE dispatch keeps the routing on the device: the grouped GEMMs read the experts' offsets
// from device memory (the same numbers as with host offsets, bit for bit), a micro-batch's dispatch
// with one expert-parallel rank downloads nothing, and the order of the rows an expert-parallel
// rank receives is built on the device exactly as the host built it.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "model/token_dispatch.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "test_helpers.hpp"

namespace {

mt::Buffer device_ints(const mt::Backend& be, const std::vector<int>& host) {
  mt::Buffer b(be, mt::DType::i32, host.size());
  be.upload(b.raw(), host.data(), host.size() * sizeof(int));
  return b;
}

std::vector<int> host_ints(const mt::Backend& be, const int* device, size_t n) {
  std::vector<int> v(n);
  be.download(v.data(), device, n * sizeof(int));
  return v;
}

// The strict CPU table with its downloads and synchronisations counted.
int host_waits = 0;
const mt::OpTable* strict_table = nullptr;
mt::OpTable counting_table() {
  mt::OpTable t = *strict_table;
  t.download = [](mt::DeviceState* s, void* dst, const void* src, size_t bytes) {
    ++host_waits;
    strict_table->download(s, dst, src, bytes);
  };
  t.synchronize = [](mt::DeviceState* s) {
    ++host_waits;
    strict_table->synchronize(s);
  };
  return t;
}

// The received rows' order, straight from its definition: they arrive grouped by (source q, local
// expert j) and are computed on grouped by (j, q); segment (q, j) starts after every segment
// before it in that order.
struct Arrivals {
  std::vector<int> local_begin, local_of, arrival_of;
};
Arrivals host_arrivals(const std::vector<int>& counts, int sources, int local) {
  auto count = [&](int q, int j) { return counts[size_t(q) * local + j]; };
  auto rows_before = [&](auto earlier) {
    int n = 0;
    for (int q = 0; q < sources; ++q)
      for (int j = 0; j < local; ++j) n += earlier(q, j) ? count(q, j) : 0;
    return n;
  };
  Arrivals r;
  for (int j = 0; j <= local; ++j) r.local_begin.push_back(rows_before([&](int, int j2) { return j2 < j; }));
  r.local_of.resize(r.local_begin.back());
  r.arrival_of.resize(r.local_begin.back());
  for (int q = 0; q < sources; ++q)
    for (int j = 0; j < local; ++j) {
      const int arrive = rows_before([&](int q2, int j2) { return q2 < q || (q2 == q && j2 < j); });
      const int at = rows_before([&](int q2, int j2) { return j2 < j || (j2 == j && q2 < q); });
      for (int i = 0; i < count(q, j); ++i) {
        r.local_of[arrive + i] = at + i;
        r.arrival_of[at + i] = arrive + i;
      }
    }
  return r;
}

}  // namespace

TEST_CASE("grouped_gemm reads device offsets: bitwise the GEMMs of the same groups from host offsets") {
  testing::StrictDevice dev;
  const int groups = 5, m = 6, n = 7, k = 9;
  const std::vector<int> offsets{0, 3, 3, 10, 11, 16};  // group 1 empty
  const int rows = offsets.back();
  const std::vector<float> a = testing::random_floats(size_t(rows) * k, 1);
  const std::vector<float> w = testing::random_floats(size_t(groups) * n * k, 2);
  const std::vector<float> dy = testing::random_floats(size_t(rows) * m, 3);
  const mt::Buffer d_offsets = device_ints(dev.be, offsets);
  const mt::Buffer d_a = dev.upload(a), d_w = dev.upload(w), d_dy = dev.upload(dy);
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    CAPTURE(int(inputs));
    // The forward and input-gradient form, and the weight-gradient form.
    mt::Buffer d_c = dev.floats(size_t(rows) * n), d_dw = dev.upload(std::vector<float>(size_t(groups) * k * m, 0.5f));
    dev.be.grouped_gemm({.groups = groups, .offsets = d_offsets.i32(), .ragged = mt::Ragged::rows, .m = rows, .n = n,
                         .k = k, .a = d_a.f32(), .b = d_w.f32(), .trans_b = true, .c = d_c.f32(), .inputs = inputs});
    dev.be.grouped_gemm({.groups = groups, .offsets = d_offsets.i32(), .ragged = mt::Ragged::reduce, .m = m, .n = k,
                         .k = rows, .a = d_dy.f32(), .b = d_a.f32(), .c = d_dw.f32(), .beta = 1.0f, .inputs = inputs});
    std::vector<float> c(size_t(rows) * n), dw(size_t(groups) * k * m, 0.5f);
    for (int g = 0; g < groups; ++g) {
      const int begin = offsets[g], count = offsets[g + 1] - begin;
      if (count == 0) continue;
      mt::cpu::gemm(nullptr, {.m = count, .n = n, .k = k, .a = a.data() + size_t(begin) * k,
                              .b = w.data() + size_t(g) * n * k, .trans_b = true, .c = c.data() + size_t(begin) * n,
                              .inputs = inputs});
      mt::cpu::gemm(nullptr, {.m = m, .n = k, .k = count, .a = dy.data() + size_t(begin) * m, .trans_a = true,
                              .b = a.data() + size_t(begin) * k, .c = dw.data() + size_t(g) * m * k, .beta = 1.0f,
                              .inputs = inputs});
    }
    CHECK(d_c.to_host_f32() == c);
    CHECK(d_dw.to_host_f32() == dw);
  }
}

TEST_CASE("moe_arrivals: the device order of received rows is the host construction, for random counts") {
  testing::StrictDevice dev;
  std::mt19937 rng(5);
  for (int sources : {2, 3, 4, 8})
    for (int local : {1, 2, 5}) {
      CAPTURE(sources);
      CAPTURE(local);
      std::vector<int> counts(size_t(sources) * local);
      for (int& c : counts) c = int(rng() % 4 == 0 ? 0 : rng() % 9);  // empty segments too
      const Arrivals want = host_arrivals(counts, sources, local);
      const int rows = want.local_begin.back();
      const mt::Buffer d_counts = device_ints(dev.be, counts);
      const mt::Buffer begin(dev.be, mt::DType::i32, size_t(local) + 1);
      const mt::Buffer local_of(dev.be, mt::DType::i32, size_t(rows) + 1);
      const mt::Buffer arrival_of(dev.be, mt::DType::i32, size_t(rows) + 1);
      dev.be.moe_arrivals({.sources = sources, .local = local, .rows = rows, .counts = d_counts.i32(),
                           .local_begin = begin.i32(), .local_of = local_of.i32(), .arrival_of = arrival_of.i32()});
      CHECK(host_ints(dev.be, begin.i32(), size_t(local) + 1) == want.local_begin);
      CHECK(host_ints(dev.be, local_of.i32(), size_t(rows)) == want.local_of);
      CHECK(host_ints(dev.be, arrival_of.i32(), size_t(rows)) == want.arrival_of);
    }
}

namespace {

// One micro-batch's routed experts through the dispatcher at ep = 1: y, dx and the weight
// gradients, flattened.
struct ExpertsRun {
  std::vector<float> y, dx, grads;
};

struct ExpertsCase {
  int tokens = 24, dim = 8, hidden = 6, experts = 5, top_k = 2;
  std::vector<int> chosen;
  std::vector<float> x, dy, gate, up, down;
  ExpertsCase() {
    std::mt19937 rng(9);
    for (int t = 0; t < tokens; ++t) {
      const int first = int(rng() % 4);  // expert 4 chosen never: an empty group
      chosen.push_back(first);
      chosen.push_back((first + 1 + int(rng() % 3)) % 4);
    }
    x = testing::random_floats(size_t(tokens) * dim, 11);
    dy = testing::random_floats(size_t(tokens) * top_k * dim, 12);
    gate = testing::random_floats(size_t(experts) * hidden * dim, 13);
    up = testing::random_floats(size_t(experts) * hidden * dim, 14);
    down = testing::random_floats(size_t(experts) * dim * hidden, 15);
  }
  // The experts' offsets counted on the host.
  std::vector<int> offsets() const {
    std::vector<int> begin(size_t(experts) + 1, 0);
    for (int e : chosen) begin[e + 1]++;
    for (int e = 0; e < experts; ++e) begin[e + 1] += begin[e];
    return begin;
  }
};

// On `be`; host_offsets: the plain CPU backend, whose device memory the host reads, given the
// offsets counted on the host (as the grouped GEMMs took them before), in place of the dispatch's.
ExpertsRun run_experts(const mt::Backend& be, const ExpertsCase& c, bool bf16, const std::vector<int>* host_offsets,
                       int* waits = nullptr) {
  mt::LayerEnv env;
  env.backend = &be;
  env.gemm_inputs = bf16 ? mt::GemmPrecision::bf16 : mt::GemmPrecision::fp32;
  env.bf16_activations = bf16;
  auto floats = [&](const std::vector<float>& v) {
    mt::Buffer b(be, mt::DType::f32, v.size());
    b.from_host(v);
    return b;
  };
  const mt::Buffer chosen = device_ints(be, c.chosen), x = floats(c.x), dy = floats(c.dy);
  const mt::Buffer gate = floats(c.gate), up = floats(c.up), down = floats(c.down);
  const size_t weights = c.gate.size();
  const mt::Buffer grads = floats(std::vector<float>(3 * weights, 0.0f));
  const mt::Buffer y(be, mt::DType::f32, c.dy.size()), dx(be, mt::DType::f32, c.dy.size());
  const mt::GroupedExpertWeights w{gate.f32(), up.f32(), down.f32(), c.experts, c.dim, c.hidden};
  mt::Arena arena(be);
  mt::TokenDispatcher dispatcher(env, c.dim, c.experts, c.top_k);
  mt::DispatchSaved saved;
  mt::GroupedExpertsSaved experts;
  if (waits) *waits = host_waits = 0;
  const mt::GemmOperand xe = dispatcher.permute(arena, chosen.i32(), c.tokens, x.f32(), nullptr, saved);
  mt::ExpertRows rows = saved.rows;
  if (host_offsets) rows.offsets = host_offsets->data();
  dispatcher.exchange(arena, saved, xe, y.f32(), [&](mt::GemmOperand in, const mt::ExpertRows&, float* out) {
    grouped_experts_forward(env, arena, arena, w, rows, in, out, experts);
  }, [] {});
  grouped_experts_backward_input(env, arena, w, dy.f32(), dx.f32(), experts);
  grouped_experts_backward_weight(env, w, {grads.f32(), grads.f32() + weights, grads.f32() + 2 * weights}, experts);
  if (waits) *waits = host_waits;
  return {y.to_host_f32(), dx.to_host_f32(), grads.to_host_f32()};
}

}  // namespace

TEST_CASE("dispatch at ep = 1: the experts run on the device offsets, no host wait, bitwise the host-offsets run") {
  const ExpertsCase c;
  const std::vector<int> offsets = c.offsets();
  testing::StrictDevice dev;
  strict_table = dev.be.ops;
  const mt::OpTable table = counting_table();
  const mt::Backend counted{&table, dev.be.state};
  for (bool bf16 : {false, true}) {
    CAPTURE(bf16);
    int waits = -1;
    const ExpertsRun got = run_experts(counted, c, bf16, nullptr, &waits);
    CHECK(waits == 0);
    const ExpertsRun want = run_experts(mt::cpu_backend(), c, bf16, &offsets);
    CHECK(got.y == want.y);
    CHECK(got.dx == want.dx);
    CHECK(got.grads == want.grads);
  }
}
