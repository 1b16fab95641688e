// Strided and batched GEMMs, attention over heads inside wider tensors or shared by groups, and
// column copies of every head at once: each the same numbers, bit for bit, as the packed calls
// they replace (the CPU reference).
#include <doctest/doctest.h>

#include <vector>

#include "ops/ops.hpp"
#include "test_helpers.hpp"

namespace {

const mt::Backend& cpu() {
  static const mt::Backend be = mt::cpu_backend();
  return be;
}

// x [rows, cols] placed at row stride ld inside a buffer of `total` values (the rest filled with junk).
std::vector<float> widen(const std::vector<float>& x, int rows, int cols, int ld, size_t total, size_t at = 0) {
  std::vector<float> out = testing::random_floats(total, 99, 50.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[at + size_t(r) * ld + c] = x[size_t(r) * cols + c];
  return out;
}

std::vector<float> narrow(const std::vector<float>& x, int rows, int cols, int ld, size_t at = 0) {
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(r) * cols + c] = x[at + size_t(r) * ld + c];
  return out;
}

void check_strided_gemm(mt::GemmPrecision inputs, bool trans_a, bool trans_b) {
  const int m = 5, n = 7, k = 6, batch = 3, pad = 3;
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k, b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  const long long sa = (long long)a_rows * lda + 2, sb = (long long)b_rows * ldb + 1, sc = (long long)m * ldc + 4;
  mt::Fp8Recipe recipe;
  recipe.tile = recipe.block = 4;
  std::vector<float> a_all(size_t(sa) * batch), b_all(size_t(sb) * batch);
  std::vector<float> c_all = testing::random_floats(sc * batch, 3);
  std::vector<std::vector<float>> want(batch);
  for (int i = 0; i < batch; ++i) {
    const std::vector<float> a = testing::random_floats(size_t(a_rows) * a_cols, 10 + i);
    const std::vector<float> b = testing::random_floats(size_t(b_rows) * b_cols, 20 + i);
    std::vector<float> c = narrow(c_all, m, n, ldc, i * sc);
    const std::vector<float> wa = widen(a, a_rows, a_cols, lda, sa), wb = widen(b, b_rows, b_cols, ldb, sb);
    std::copy(wa.begin(), wa.end(), a_all.begin() + i * sa);
    std::copy(wb.begin(), wb.end(), b_all.begin() + i * sb);
    cpu().gemm({.m = m, .n = n, .k = k, .a = a.data(), .trans_a = trans_a, .b = b.data(), .trans_b = trans_b,
                .c = c.data(), .alpha = 0.5f, .beta = 0.25f, .inputs = inputs, .fp8 = {&recipe}});
    want[i] = c;
  }
  cpu().gemm({.m = m, .n = n, .k = k, .a = a_all.data(), .trans_a = trans_a, .b = b_all.data(), .trans_b = trans_b,
              .c = c_all.data(), .alpha = 0.5f, .beta = 0.25f, .inputs = inputs, .fp8 = {&recipe}, .lda = lda,
              .ldb = ldb, .ldc = ldc, .batch = batch, .batch_a = sa, .batch_b = sb, .batch_c = sc});
  for (int i = 0; i < batch; ++i) CHECK(narrow(c_all, m, n, ldc, i * sc) == want[i]);
}

}  // namespace

TEST_CASE("gemm: leading dimensions and batches give the packed products bit for bit") {
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16, mt::GemmPrecision::fp8})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(int(inputs));
        CAPTURE(ta);
        CAPTURE(tb);
        check_strided_gemm(inputs, ta, tb);
      }
}

TEST_CASE("copy_columns: every group in one call, or summed in group order, as one call per group") {
  const int rows = 3, groups = 4, cols = 2, src_w = 5, dst_w = 3;
  const std::vector<float> src = testing::random_floats(size_t(rows) * groups * src_w, 5);
  std::vector<float> one(size_t(rows) * groups * dst_w), each(one.size());
  for (int g = 0; g < groups; ++g)
    cpu().copy_columns({.rows = rows, .cols = cols, .src = src.data() + g * src_w + 1, .src_stride = groups * src_w,
                        .dst = each.data() + g * dst_w, .dst_stride = groups * dst_w});
  cpu().copy_columns({.rows = rows, .cols = cols, .src = src.data() + 1, .src_stride = groups * src_w,
                      .dst = one.data(), .dst_stride = groups * dst_w, .groups = groups, .src_group = src_w,
                      .dst_group = dst_w});
  CHECK(one == each);
  std::vector<float> sum_one(size_t(rows) * cols, 1.0f), sum_each(sum_one.size(), 1.0f);
  for (int g = 0; g < groups; ++g)
    cpu().copy_columns({.rows = rows, .cols = cols, .src = src.data() + g * src_w, .src_stride = groups * src_w,
                        .dst = sum_each.data(), .dst_stride = cols, .accumulate = g > 0});
  cpu().copy_columns({.rows = rows, .cols = cols, .src = src.data(), .src_stride = groups * src_w,
                      .dst = sum_one.data(), .dst_stride = cols, .groups = groups, .src_group = src_w});
  CHECK(sum_one == sum_each);
}

namespace {

// What attention forward and backward write.
struct AttnRun {
  std::vector<float> out, lse, dq, dk, dv;
};

struct Attn {
  int batch = 2, seq = 5, heads = 4, kv = 2, dim = 3;
  size_t rows() const { return size_t(batch) * seq; }
};

}  // namespace

TEST_CASE("attention: heads read and written in place, and grouped keys shared, as packed per-head tensors") {
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    CAPTURE(int(inputs));
    const Attn s;
    const int H = s.heads, KV = s.kv, D = s.dim, group = H / KV;
    const size_t R = s.rows();
    const std::vector<float> q = testing::random_floats(R * H * D, 1), k = testing::random_floats(R * KV * D, 2);
    const std::vector<float> v = testing::random_floats(R * KV * D, 3), dout = testing::random_floats(R * H * D, 4);
    // The reference: keys and values repeated per query head, packed; their gradients summed per group.
    std::vector<float> ke(R * H * D), ve(R * H * D);
    for (size_t r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h)
        for (int c = 0; c < D; ++c) {
          ke[(r * H + h) * D + c] = k[(r * KV + h / group) * D + c];
          ve[(r * H + h) * D + c] = v[(r * KV + h / group) * D + c];
        }
    AttnRun want{std::vector<float>(R * H * D), std::vector<float>(R * H), std::vector<float>(R * H * D),
                 std::vector<float>(R * H * D), std::vector<float>(R * H * D)};
    cpu().attention_forward({.batch = s.batch, .seq = s.seq, .heads = H, .qk_dim = D, .v_dim = D, .scale = 0.7f,
                             .q = q.data(), .k = ke.data(), .v = ve.data(), .out = want.out.data(),
                             .lse = want.lse.data(), .inputs = inputs});
    cpu().attention_backward({.batch = s.batch, .seq = s.seq, .heads = H, .qk_dim = D, .v_dim = D, .scale = 0.7f,
                              .q = q.data(), .k = ke.data(), .v = ve.data(), .out = want.out.data(),
                              .lse = want.lse.data(), .dout = dout.data(), .dq = want.dq.data(),
                              .dk = want.dk.data(), .dv = want.dv.data(), .inputs = inputs});
    std::vector<float> dk_sum(R * KV * D), dv_sum(R * KV * D);
    for (size_t r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h)
        for (int c = 0; c < D; ++c) {
          const size_t to = (r * KV + h / group) * D + c, from = (r * H + h) * D + c;
          dk_sum[to] = h % group ? dk_sum[to] + want.dk[from] : want.dk[from];
          dv_sum[to] = h % group ? dv_sum[to] + want.dv[from] : want.dv[from];
        }

    // Every operand a column window of a wider tensor: rows of `w` values, heads `hs` apart.
    const int qw = H * D + 2, kw = KV * (D + 1) + 1, hs = D + 1;
    const mt::HeadStrides qa{qw, D}, ka{kw, hs};
    auto place = [&](const std::vector<float>& x, int heads, mt::HeadStrides at) {
      std::vector<float> out = testing::random_floats(R * at.row, 77, 30.0);
      for (size_t r = 0; r < R; ++r)
        for (int h = 0; h < heads; ++h)
          for (int c = 0; c < D; ++c) out[r * at.row + h * at.head + c] = x[(r * heads + h) * D + c];
      return out;
    };
    auto take = [&](const std::vector<float>& x, int heads, mt::HeadStrides at) {
      std::vector<float> out(R * heads * D);
      for (size_t r = 0; r < R; ++r)
        for (int h = 0; h < heads; ++h)
          for (int c = 0; c < D; ++c) out[(r * heads + h) * D + c] = x[r * at.row + h * at.head + c];
      return out;
    };
    const std::vector<float> qs = place(q, H, qa), ks = place(k, KV, ka), vs = place(v, KV, ka);
    const std::vector<float> douts = place(dout, H, qa);  // dout is laid out as out
    std::vector<float> outs = place(std::vector<float>(R * H * D), H, qa), lse(R * H);
    std::vector<float> dqs = outs, dks = ks, dvs = vs;
    cpu().attention_forward({.batch = s.batch, .seq = s.seq, .heads = H, .qk_dim = D, .v_dim = D, .scale = 0.7f,
                             .q = qs.data(), .k = ks.data(), .v = vs.data(), .out = outs.data(), .lse = lse.data(),
                             .inputs = inputs, .kv_heads = KV, .q_at = qa, .k_at = ka, .v_at = ka, .out_at = qa});
    CHECK(take(outs, H, qa) == want.out);
    CHECK(lse == want.lse);
    cpu().attention_backward({.batch = s.batch, .seq = s.seq, .heads = H, .qk_dim = D, .v_dim = D, .scale = 0.7f,
                              .q = qs.data(), .k = ks.data(), .v = vs.data(), .out = outs.data(), .lse = lse.data(),
                              .dout = douts.data(), .dq = dqs.data(), .dk = dks.data(), .dv = dvs.data(),
                              .inputs = inputs, .kv_heads = KV, .q_at = qa, .k_at = ka, .v_at = ka, .out_at = qa,
                              .dq_at = qa, .dk_at = ka, .dv_at = ka});
    CHECK(take(dqs, H, qa) == want.dq);
    CHECK(take(dks, KV, ka) == dk_sum);
    CHECK(take(dvs, KV, ka) == dv_sum);
  }
}
