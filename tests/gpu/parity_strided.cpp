// Parity of the strided forms: GEMMs with leading dimensions and batches, attention over heads
// inside wider tensors with grouped keys and values, and column copies of every head at once.
// Outputs start as NaN inside their windows and random around them; both must come back right.
#include <cstdio>
#include <vector>

#include "parity.hpp"

namespace parity {

namespace {

using Floats = DeviceVec<float>;

void check_strided_gemm(const Context& c, int m, int n, int k, int batch, bool ta, bool tb, mt::GemmPrecision inputs,
                        uint64_t seed) {
  Lcg rng(seed);
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  const int lda = a_cols + 8, ldb = b_cols + 4, ldc = n + 8;
  const long long sa = (long long)a_rows * lda + 16, sb = (long long)b_rows * ldb, sc = (long long)m * ldc + 8;
  const std::vector<float> a = random_values(size_t(sa) * batch, rng), b = random_values(size_t(sb) * batch, rng);
  const std::vector<float> c0 = random_values(size_t(sc) * batch, rng);
  mt::GemmArgs g{.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .alpha = 0.75f, .beta = 0.5f,
                 .inputs = inputs, .lda = lda, .ldb = ldb, .ldc = ldc, .batch = batch, .batch_a = sa, .batch_b = sb,
                 .batch_c = sc};
  std::vector<float> want = c0;
  g.a = a.data(), g.b = b.data(), g.c = want.data();
  c.cpu.gemm(g);
  Floats ga(c.gpu, a), gb(c.gpu, b), gc(c.gpu, c0);
  g.a = ga.get(), g.b = gb.get(), g.c = gc.get();
  c.gpu.gemm(g);
  char name[200];
  std::snprintf(name, sizeof name, "strided gemm %s m=%d n=%d k=%d batch=%d trans_a=%d trans_b=%d",
                inputs == mt::GemmPrecision::bf16 ? "bf16" : "fp32", m, n, k, batch, int(ta), int(tb));
  c.rep.check(name, relative_error(gc.download(), want), 1e-4);
}

// Every operand a window of a wider tensor (rows of `heads * dim + pad`, heads `dim + 1` apart for
// keys and values), kv_heads shared by the query heads.
void check_strided_attention(const Context& c, int batch, int seq, int heads, int kv_heads, int dim,
                             mt::GemmPrecision inputs, uint64_t seed) {
  Lcg rng(seed);
  const size_t rows = size_t(batch) * seq;
  const mt::HeadStrides qa{heads * dim + 8, dim}, ka{kv_heads * (dim + 8) + 8, dim + 8};
  const std::vector<float> q = random_values(rows * qa.row, rng), k = random_values(rows * ka.row, rng);
  const std::vector<float> v = random_values(rows * ka.row, rng), dout = random_values(rows * qa.row, rng);
  const std::vector<float> out0 = random_values(rows * qa.row, rng), dk0 = random_values(rows * ka.row, rng);
  const float scale = 0.125f;
  const bool bf16 = inputs == mt::GemmPrecision::bf16;
  std::vector<float> out = out0, lse(rows * heads), dq = out0, dk = dk0, dv = dk0;
  const mt::AttentionForwardArgs fa{.batch = batch, .seq = seq, .heads = heads, .qk_dim = dim, .v_dim = dim,
                                    .scale = scale, .inputs = inputs, .kv_heads = kv_heads, .q_at = qa, .k_at = ka,
                                    .v_at = ka, .out_at = qa};
  mt::AttentionForwardArgs f = fa;
  f.q = q.data(), f.k = k.data(), f.v = v.data(), f.out = out.data(), f.lse = lse.data();
  c.cpu.attention_forward(f);
  Floats gq(c.gpu, q), gk(c.gpu, k), gv(c.gpu, v), gdout(c.gpu, dout), gout(c.gpu, out0);
  Floats glse(c.gpu, poison<float>(lse.size()));
  f = fa;
  f.q = gq.get(), f.k = gk.get(), f.v = gv.get(), f.out = gout.get(), f.lse = glse.get();
  c.gpu.attention_forward(f);
  char shape[160];
  std::snprintf(shape, sizeof shape, " batch=%d seq=%d heads=%d kv_heads=%d dim=%d%s", batch, seq, heads, kv_heads,
                dim, bf16 ? " bf16" : "");
  const double tol = bf16 ? 1e-2 : 1e-5;
  c.rep.check(std::string("strided attention_forward out") + shape, relative_error(gout.download(), out), tol);

  mt::AttentionBackwardArgs ba{.batch = batch, .seq = seq, .heads = heads, .qk_dim = dim, .v_dim = dim,
                               .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data(),
                               .lse = lse.data(), .dout = dout.data(), .dq = dq.data(), .dk = dk.data(),
                               .dv = dv.data(), .inputs = inputs, .kv_heads = kv_heads, .q_at = qa, .k_at = ka,
                               .v_at = ka, .out_at = qa, .dq_at = qa, .dk_at = ka, .dv_at = ka};
  c.cpu.attention_backward(ba);
  Floats cout(c.gpu, out), clse(c.gpu, lse), gdq(c.gpu, out0), gdk(c.gpu, dk0), gdv(c.gpu, dk0);
  ba.q = gq.get(), ba.k = gk.get(), ba.v = gv.get(), ba.out = cout.get(), ba.lse = clse.get(), ba.dout = gdout.get();
  ba.dq = gdq.get(), ba.dk = gdk.get(), ba.dv = gdv.get();
  c.gpu.attention_backward(ba);
  c.rep.check(std::string("strided attention_backward dq") + shape, relative_error(gdq.download(), dq), tol);
  c.rep.check(std::string("strided attention_backward dk") + shape, relative_error(gdk.download(), dk), tol);
  c.rep.check(std::string("strided attention_backward dv") + shape, relative_error(gdv.download(), dv), tol);
}

// `groups` windows in one call, each to its own place or (summed) all into one.
void check_grouped_copy(const Context& c, int rows, int cols, int groups, bool summed, bool accumulate,
                        uint64_t seed) {
  Lcg rng(seed);
  const int src_w = cols + 3, dst_w = summed ? cols + 1 : groups * (cols + 2);
  const std::vector<float> src = random_values(size_t(rows) * groups * src_w, rng);
  const std::vector<float> dst0 = random_values(size_t(rows) * dst_w, rng);
  mt::CopyColumnsArgs a{.rows = rows, .cols = cols, .src_stride = groups * src_w, .dst_stride = dst_w,
                        .accumulate = accumulate, .groups = groups, .src_group = src_w,
                        .dst_group = summed ? 0 : cols + 2};
  std::vector<float> want = dst0;
  a.src = src.data() + 1, a.dst = want.data();
  c.cpu.copy_columns(a);
  Floats gsrc(c.gpu, src), gdst(c.gpu, dst0);
  a.src = gsrc.get() + 1, a.dst = gdst.get();
  c.gpu.copy_columns(a);
  char name[160];
  std::snprintf(name, sizeof name, "copy_columns rows=%d cols=%d groups=%d%s%s", rows, cols, groups,
                summed ? " summed" : "", accumulate ? " accumulate" : "");
  c.rep.check(name, relative_error(gdst.download(), want), 0);
}

}  // namespace

void group_strided(const Context& c, uint64_t seed) {
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16})
    for (int t = 0; t < 4; ++t) {
      check_strided_gemm(c, 64, 48, 32, 1, t & 1, t & 2, inputs, seed++);
      check_strided_gemm(c, 33, 17, 40, 5, t & 1, t & 2, inputs, seed++);
    }
  // fp32 on CUDA cores; bf16 through the tensor-core kernels (head dim 64) and CUDA cores (40).
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    check_strided_attention(c, 2, 100, 4, 2, 64, inputs, seed++);
    check_strided_attention(c, 1, 70, 6, 6, 64, inputs, seed++);
    check_strided_attention(c, 3, 33, 4, 1, 40, inputs, seed++);
  }
  for (bool accumulate : {false, true})
    for (bool summed : {false, true}) {
      check_grouped_copy(c, 37, 5, 4, summed, accumulate, seed++);
      check_grouped_copy(c, 1000, 64, 16, summed, accumulate, seed++);
    }
}

}  // namespace parity
