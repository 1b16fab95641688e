// Parity of Muon's ops: the momentum and the update element by element (bitwise), and the
// Newton-Schulz iteration on batches of matrices (wide, tall, square), whose GPU products are
// cuBLAS's GEMMs summing in another order than the CPU's loops (its bounds not yet measured on a GPU).
#include <string>
#include <vector>

#include "ops/optimizer/newton_schulz.hpp"
#include "parity.hpp"

namespace parity {

namespace {

using Floats = DeviceVec<float>;

void check_newton_schulz(const Context& c, int count, int rows, int cols, mt::GemmPrecision inputs, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> x = random_values(size_t(count) * rows * cols, rng);
  const size_t work = size_t(count) * mt::newton_schulz_work(rows, cols);
  std::vector<float> want = x, scratch(work);
  mt::NewtonSchulzArgs a{.count = count, .rows = rows, .cols = cols, .inputs = inputs};
  a.x = want.data(), a.work = scratch.data();
  c.cpu.newton_schulz(a);
  Floats gx(c.gpu, x), gwork(c.gpu, poison<float>(work));
  a.x = gx.get(), a.work = gwork.get();
  c.gpu.newton_schulz(a);
  const bool bf16 = inputs == mt::GemmPrecision::bf16;
  c.rep.check("newton_schulz count=" + std::to_string(count) + " rows=" + std::to_string(rows) +
                  " cols=" + std::to_string(cols) + (bf16 ? " bf16" : ""),
              relative_error(gx.download(), want), bf16 ? 5e-2 : 1e-4);
}

void check_muon_elements(const Context& c, size_t n, uint64_t seed) {
  Lcg rng(seed);
  const std::vector<float> grad = random_values(n, rng), buf0 = random_values(n, rng), value0 = random_values(n, rng);
  const mt::MuonStepValues step{.lr = 0.02, .decay = 0.002};
  std::vector<float> buf = buf0, update(n), value = value0;
  c.cpu.muon_momentum({.n = n, .grad = grad.data(), .buf = buf.data(), .update = update.data()});
  c.cpu.muon_apply({.n = n, .step = &step, .scale = 1.5, .update = update.data(), .value = value.data()});
  Floats ggrad(c.gpu, grad), gbuf(c.gpu, buf0), gupdate(c.gpu, poison<float>(n)), gvalue(c.gpu, value0);
  DeviceVec<mt::MuonStepValues> gstep(c.gpu, {step});
  c.gpu.muon_momentum({.n = n, .grad = ggrad.get(), .buf = gbuf.get(), .update = gupdate.get()});
  c.gpu.muon_apply({.n = n, .step = gstep.get(), .scale = 1.5, .update = gupdate.get(), .value = gvalue.get()});
  const std::string name = " n=" + std::to_string(n);
  c.rep.check("muon_momentum buf" + name, relative_error(gbuf.download(), buf), 0);
  c.rep.check("muon_momentum update" + name, relative_error(gupdate.download(), update), 0);
  c.rep.check("muon_apply" + name, relative_error(gvalue.download(), value), 0);
}

}  // namespace

void group_muon(const Context& c, uint64_t seed) {
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    check_newton_schulz(c, 1, 64, 64, inputs, seed++);
    check_newton_schulz(c, 4, 96, 32, inputs, seed++);   // experts' w_up: tall, batched
    check_newton_schulz(c, 3, 32, 200, inputs, seed++);  // wide
  }
  check_muon_elements(c, 1, seed++);
  check_muon_elements(c, 100003, seed++);
}

}  // namespace parity
