// OpProfile: a backend that forwards every op and times it by kind.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ops/backend/op_profile.hpp"
#include "tensor/buffer.hpp"

namespace {

const mt::OpKindTime& kind(const std::vector<mt::OpKindTime>& all, const std::string& name) {
  for (const mt::OpKindTime& t : all)
    if (t.name == name) return t;
  FAIL("no op kind " << name);
  return all.front();
}

std::vector<float> ramp(size_t n, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i % 7) * step - 1.0f;
  return v;
}

void check_over(const mt::Backend& inner) {
  mt::OpProfile profile(inner);
  const mt::Backend& be = profile.backend();
  CHECK(std::string(be.ops->name) == inner.ops->name);
  CHECK(mt::missing_ops(*be.ops).empty());
  const int m = 24, n = 16, k = 40;
  mt::Buffer a(inner, mt::DType::f32, size_t(m) * k), b(inner, mt::DType::f32, size_t(k) * n);
  mt::Buffer direct(inner, mt::DType::f32, size_t(m) * n), through(inner, mt::DType::f32, size_t(m) * n);
  a.from_host(ramp(a.count(), 0.25f));
  b.from_host(ramp(b.count(), 0.5f));
  mt::GemmArgs g{.m = m, .n = n, .k = k, .a = a.f32(), .b = b.f32()};
  g.c = direct.f32();
  inner.gemm(g);
  g.c = through.f32();
  for (int i = 0; i < 3; ++i) be.gemm(g);
  be.add({.n = through.count(), .x = direct.f32(), .y = through.f32()});
  // The same numbers as the inner backend: three overwrites, then + direct.
  std::vector<float> want = direct.to_host_f32();
  for (float& x : want) x *= 2;
  CHECK(through.to_host_f32() == want);

  const std::vector<mt::OpKindTime> ops = profile.take();
  CHECK(kind(ops, "gemm").calls == 3);
  CHECK(kind(ops, "gemm").flops == doctest::Approx(3 * 2.0 * m * n * k));
  CHECK(kind(ops, "gemm").seconds > 0);
  CHECK(kind(ops, "add").calls == 1);
  CHECK(kind(ops, "add").flops == 0);
  CHECK(kind(ops, "add").bytes == doctest::Approx(3.0 * 4 * m * n));  // x and y read, y written
  CHECK(kind(ops, "gemm").bytes == 0);                                // FLOPs set its pace
  CHECK(kind(ops, "rope").calls == 0);
  // Taken: the next read starts over.
  const std::vector<mt::OpKindTime> again = profile.take();
  CHECK(kind(again, "gemm").calls == 0);
  CHECK(kind(again, "gemm").seconds == 0);
}

}  // namespace

TEST_CASE("op profile: forwards every op to the inner backend, counts and times each kind") {
  check_over(mt::cpu_backend());
  mt::Backend strict = mt::cpu_strict_backend_create();
  check_over(strict);
  mt::cpu_strict_backend_destroy(strict);
}

TEST_CASE("op profile: attention's FLOPs count the causal half of each score matrix") {
  mt::OpProfile profile(mt::cpu_backend());
  const int batch = 1, seq = 8, heads = 2, qk = 4, v = 4;
  std::vector<float> q(size_t(seq) * heads * qk, 0.1f), kv(size_t(seq) * heads * qk, 0.2f), vv(size_t(seq) * heads * v, 0.3f);
  std::vector<float> out(size_t(seq) * heads * v), lse(size_t(seq) * heads);
  profile.backend().attention_forward({.batch = batch, .seq = seq, .heads = heads, .qk_dim = qk, .v_dim = v, .scale = 0.5f,
                                       .q = q.data(), .k = kv.data(), .v = vv.data(), .out = out.data(), .lse = lse.data()});
  const std::vector<mt::OpKindTime> ops = profile.take();
  // QK^T and PV over seq x seq / 2 pairs, two FLOPs per multiply-add.
  CHECK(kind(ops, "attention_forward").flops == doctest::Approx(2.0 * batch * heads * (seq * seq / 2.0) * (qk + v)));
}

TEST_CASE("op profile: a grouped GEMM's FLOPs come from all groups' rows") {
  mt::OpProfile profile(mt::cpu_backend());
  // Two experts with 3 and 5 rows: C[rows_g, n] = A[rows_g, k] B_g^T.
  const int groups = 2, rows = 8, n = 4, k = 6;
  const std::vector<int> offsets{0, 3, 8};
  std::vector<float> a(size_t(rows) * k, 0.5f), b(size_t(groups) * n * k, 0.25f), c(size_t(rows) * n);
  profile.backend().grouped_gemm({.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::rows, .m = rows,
                                  .n = n, .k = k, .a = a.data(), .b = b.data(), .trans_b = true, .c = c.data()});
  CHECK(c[0] == doctest::Approx(k * 0.5f * 0.25f));
  CHECK(kind(profile.take(), "grouped_gemm").flops == doctest::Approx(2.0 * rows * n * k));
}

TEST_CASE("op profile table: per step, most time first, kinds never called left out") {
  std::vector<mt::OpKindTime> sum;
  mt::add_op_times(sum, {{"gemm", 4, 0.002, 4e9, 0}, {"rope", 0, 0, 0, 0}, {"add", 2, 0.006, 0, 3e9}});
  mt::add_op_times(sum, {{"gemm", 4, 0.002, 4e9, 0}, {"rope", 0, 0, 0, 0}, {"add", 2, 0.006, 0, 3e9}});
  CHECK(sum[0].calls == 8);
  const std::string table = mt::op_profile_table(sum, 2);
  CHECK(table.find("mean of 2 step(s)") != std::string::npos);
  CHECK(table.find("rope") == std::string::npos);
  CHECK(table.find("add") < table.find("gemm"));              // 6 ms before 2 ms
  CHECK(table.find("2000.0") != std::string::npos);           // gemm: 8e9 FLOPs in 4 ms
  CHECK(table.find("75.0%") != std::string::npos);            // add's share of 16 ms
  CHECK(table.find("8.000") != std::string::npos);            // all ops: 8 ms per step
  CHECK(table.find("500.0") != std::string::npos);            // add: 6e9 bytes in 12 ms
}
