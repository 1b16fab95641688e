// Causal attention on cuDNN's fused attention and on the own kernels against the CPU reference, at the
// shapes the models run: GPT-2's heads (64/64), DeepSeek-V3's MLA (192/128), grouped-query heads and a
// sequence that is no tile multiple. bf16 products on every side, so gpu_parity.cpp's bf16 tolerance
// (1e-2) holds; cuDNN rounds out and the gradients to bfloat16 once more, which moves them by 2^-9.
#include <cmath>
#include <cstdio>
#include <string>

#include "ops/backend/cuda_backend.hpp"
#include "parity.hpp"

namespace parity {

namespace {

struct Shape {
  int batch, seq, heads, kv_heads, qk_dim, v_dim;
};

using DeviceFloats = DeviceVec<float>;

constexpr double kBf16Tol = 1e-2;

// Forward (out, lse) and backward (dq, dk, dv, from the CPU's out and lse) of `gpu` against the CPU.
void check_shape(Report& rep, const mt::Backend& cpu, const mt::Backend& gpu, const Shape& s, const std::string& path,
                 uint64_t seed) {
  Lcg rng(seed);
  const size_t tokens = size_t(s.batch) * s.seq;
  const size_t nq = tokens * s.heads * s.qk_dim, nk = tokens * s.kv_heads * s.qk_dim;
  const size_t nv = tokens * s.kv_heads * s.v_dim, no = tokens * s.heads * s.v_dim, nrow = tokens * s.heads;
  const std::vector<float> q = random_values(nq, rng), k = random_values(nk, rng), v = random_values(nv, rng);
  const std::vector<float> dout = random_values(no, rng);
  const float scale = 1.0f / std::sqrt(float(s.qk_dim));
  const mt::AttentionForwardArgs f{.batch = s.batch, .seq = s.seq, .heads = s.heads, .qk_dim = s.qk_dim,
                                   .v_dim = s.v_dim, .scale = scale, .inputs = mt::GemmPrecision::bf16,
                                   .kv_heads = s.kv_heads};
  char name[160];
  std::snprintf(name, sizeof name, " on %s batch=%d seq=%d heads=%d/%d qk=%d v=%d", path.c_str(), s.batch, s.seq,
                s.heads, s.kv_heads, s.qk_dim, s.v_dim);

  std::vector<float> out(no), lse(nrow);
  mt::AttentionForwardArgs cf = f;
  cf.q = q.data(), cf.k = k.data(), cf.v = v.data(), cf.out = out.data(), cf.lse = lse.data();
  cpu.attention_forward(cf);
  DeviceFloats gq(gpu, q), gk(gpu, k), gv(gpu, v), gdout(gpu, dout);
  DeviceFloats gout(gpu, poison<float>(no)), glse(gpu, poison<float>(nrow));
  mt::AttentionForwardArgs gf = f;
  gf.q = gq.get(), gf.k = gk.get(), gf.v = gv.get(), gf.out = gout.get(), gf.lse = glse.get();
  gpu.attention_forward(gf);
  rep.check("attention_forward out" + std::string(name), relative_error(gout.download(), out), kBf16Tol);
  rep.check("attention_forward lse" + std::string(name), relative_error(glse.download(), lse), kBf16Tol);

  std::vector<float> dq(nq), dk(nk), dv(nv);
  mt::AttentionBackwardArgs b{.batch = s.batch, .seq = s.seq, .heads = s.heads, .qk_dim = s.qk_dim,
                              .v_dim = s.v_dim, .scale = scale, .q = q.data(), .k = k.data(), .v = v.data(),
                              .out = out.data(), .lse = lse.data(), .dout = dout.data(), .dq = dq.data(),
                              .dk = dk.data(), .dv = dv.data(), .inputs = mt::GemmPrecision::bf16,
                              .kv_heads = s.kv_heads};
  cpu.attention_backward(b);
  DeviceFloats cpu_out(gpu, out), cpu_lse(gpu, lse);
  DeviceFloats gdq(gpu, poison<float>(nq)), gdk(gpu, poison<float>(nk)), gdv(gpu, poison<float>(nv));
  b.q = gq.get(), b.k = gk.get(), b.v = gv.get(), b.out = cpu_out.get(), b.lse = cpu_lse.get(), b.dout = gdout.get();
  b.dq = gdq.get(), b.dk = gdk.get(), b.dv = gdv.get();
  gpu.attention_backward(b);
  rep.check("attention_backward dq" + std::string(name), relative_error(gdq.download(), dq), kBf16Tol);
  rep.check("attention_backward dk" + std::string(name), relative_error(gdk.download(), dk), kBf16Tol);
  rep.check("attention_backward dv" + std::string(name), relative_error(gdv.download(), dv), kBf16Tol);
}

}  // namespace

void group_attention_cudnn(const Context& c, uint64_t seed) {
  const Shape shapes[] = {{2, 128, 12, 12, 64, 64}, {1, 130, 2, 2, 192, 128}, {2, 100, 8, 2, 128, 128},
                          {1, 256, 4, 1, 64, 64}};
  if (!c.cuda) {
    c.rep.skip("attention on cuDNN and on the own kernels", "the CPU stand-in has neither");
    return;
  }
  for (const mt::AttentionImpl impl : {mt::AttentionImpl::own, mt::AttentionImpl::cudnn}) {
    mt::Backend gpu = mt::cuda_backend_create(0, {.attention = impl});
    const std::string note = mt::cuda_attention_note(gpu);
    if (impl == mt::AttentionImpl::cudnn && note.rfind("own kernels", 0) == 0) {
      c.rep.skip("attention on cuDNN", note);
    } else {
      uint64_t s = seed;
      for (const Shape& shape : shapes) {
        try {
          check_shape(c.rep, c.cpu, gpu, shape, mt::attention_impl_name(impl), s++);
        } catch (const std::exception& e) {
          c.rep.check(std::string("attention on ") + mt::attention_impl_name(impl) + ": " + e.what(), INFINITY, 0);
        }
      }
      if (impl == mt::AttentionImpl::cudnn) std::printf("%s", mt::cuda_attention_shapes(gpu).c_str());
    }
    mt::cuda_backend_destroy(gpu);
  }
}

}  // namespace parity
