// GPU parity of the MoE and optimizer ops against the CPU reference: routing, grouping by
// expert, the order of an expert-parallel rank's received rows, gathers, the gated combine,
// balance statistics, the router's backward pass, the bias update, the MTP shift, grouped GEMMs
// and the optimizer's ops. Integer results (choices, permutations) must match exactly; sums done
// in the CPU's order by one GPU thread to 1e-12.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "parity.hpp"

namespace parity {

namespace {

using mt::Backend;
using mt::Fp8Format;

std::string shape(int tokens, int experts, int top_k) {
  return " tokens=" + std::to_string(tokens) + " experts=" + std::to_string(experts) + " top_k=" + std::to_string(top_k);
}

void check_routing(Report& rep, const Backend& cpu, const Backend& gpu, int tokens, int experts, int top_k, int groups,
                   int topk_groups, uint64_t seed) {
  Lcg rng(seed);
  const std::string name = shape(tokens, experts, top_k) + " groups=" + std::to_string(groups);
  const size_t n = size_t(tokens) * experts, picks = size_t(tokens) * top_k;
  const std::vector<float> logits = random_values(n, rng, -3.0f, 3.0f), bias = random_values(experts, rng, -0.2f, 0.2f);

  std::vector<float> scores(n);
  cpu.sigmoid({.n = n, .x = logits.data(), .y = scores.data()});
  DeviceVec<float> g_logits(gpu, logits), g_scores(gpu, poison<float>(n));
  gpu.sigmoid({.n = n, .x = g_logits.get(), .y = g_scores.get()});
  rep.check("sigmoid" + name, relative_error(g_scores.download(), scores), 1e-6);

  // Selection and everything after it start from the CPU's scores on both sides.
  DeviceVec<float> d_scores(gpu, scores), d_bias(gpu, bias);
  std::vector<int> chosen(picks);
  std::vector<float> gates(picks);
  mt::RouterSelectArgs sel{.tokens = tokens, .experts = experts, .top_k = top_k, .n_groups = groups,
                           .topk_groups = topk_groups, .route_scale = 2.5f, .scores = scores.data(),
                           .bias = bias.data(), .chosen = chosen.data(), .gates = gates.data()};
  cpu.router_select(sel);
  DeviceVec<int> g_chosen(gpu, poison<int>(picks));
  DeviceVec<float> g_gates(gpu, poison<float>(picks));
  sel.scores = d_scores.get(), sel.bias = d_bias.get(), sel.chosen = g_chosen.get(), sel.gates = g_gates.get();
  gpu.router_select(sel);
  rep.check("router_select chosen" + name, relative_error(g_chosen.download(), chosen), 0);
  rep.check("router_select gates" + name, relative_error(g_gates.download(), gates), 1e-6);

  // Grouping by expert, with the load accumulated on top of earlier counts.
  std::vector<int> begin(experts + 1), perm(picks), slot(picks);
  std::vector<double> load(experts, 3.0);
  mt::MoePermuteArgs pa{.tokens = tokens, .top_k = top_k, .experts = experts, .chosen = chosen.data(),
                        .expert_begin = begin.data(), .perm_token = perm.data(), .slot_row = slot.data(),
                        .load = load.data()};
  cpu.moe_permute(pa);
  DeviceVec<int> d_chosen(gpu, chosen), g_begin(gpu, poison<int>(experts + 1)), g_perm(gpu, poison<int>(picks)),
      g_slot(gpu, poison<int>(picks));
  DeviceVec<double> g_load(gpu, std::vector<double>(experts, 3.0));
  pa.chosen = d_chosen.get(), pa.expert_begin = g_begin.get(), pa.perm_token = g_perm.get();
  pa.slot_row = g_slot.get(), pa.load = g_load.get();
  gpu.moe_permute(pa);
  rep.check("moe_permute expert_begin" + name, relative_error(g_begin.download(), begin), 0);
  rep.check("moe_permute perm_token" + name, relative_error(g_perm.download(), perm), 0);
  rep.check("moe_permute slot_row" + name, relative_error(g_slot.download(), slot), 0);
  rep.check("moe_permute load" + name, relative_error(g_load.download(), load), 0);

  // Router backward with a sequence-wise balance loss over groups of 8 tokens (the ops take
  // whole groups: tokens is a multiple of the group, as batch * seq_len is of seq_len).
  const int group = 8, n_groups = tokens / group;
  std::vector<double> f(size_t(n_groups) * experts);
  std::vector<double> loss_sum{0.25};  // the ops add weight * the loss to it
  mt::BalanceLossArgs bl{.tokens = tokens, .experts = experts, .top_k = top_k, .group = group, .alpha = 0.01f,
                         .scores = scores.data(), .chosen = chosen.data(), .f = f.data(), .weight = 3.0,
                         .sum = loss_sum.data()};
  cpu.balance_loss(bl);
  const double loss = loss_sum[0];
  DeviceVec<double> g_f(gpu, poison<double>(f.size())), g_loss_sum(gpu, std::vector<double>{0.25});
  bl.scores = d_scores.get(), bl.chosen = d_chosen.get(), bl.f = g_f.get(), bl.sum = g_loss_sum.get();
  gpu.balance_loss(bl);
  const double g_loss = g_loss_sum.download()[0];
  rep.check("balance_loss f" + name, relative_error(g_f.download(), f), 1e-12);
  rep.check("balance_loss value" + name, std::fabs(g_loss - loss) / std::fabs(loss), 1e-9);

  const std::vector<float> dgate = random_values(picks, rng);
  DeviceVec<float> d_gates(gpu, gates), d_dgate(gpu, dgate);
  DeviceVec<double> d_f(gpu, f);
  std::vector<float> dlogits(n);
  mt::RouterBackwardArgs rb{.tokens = tokens, .experts = experts, .top_k = top_k, .route_scale = 2.5f,
                            .scores = scores.data(), .chosen = chosen.data(), .gates = gates.data(),
                            .dgate = dgate.data(), .f = f.data(), .group = group, .f_stride = experts, .coef = 0.3,
                            .dlogits = dlogits.data()};
  cpu.router_backward(rb);
  DeviceVec<float> g_dlogits(gpu, poison<float>(n));
  rb.scores = d_scores.get(), rb.chosen = d_chosen.get(), rb.gates = d_gates.get(), rb.dgate = d_dgate.get();
  rb.f = d_f.get(), rb.dlogits = g_dlogits.get();
  gpu.router_backward(rb);
  rep.check("router_backward" + name, relative_error(g_dlogits.download(), dlogits), 1e-6);

  std::vector<double> sums(experts, 1.5);
  cpu.balance_prob_sums({.tokens = tokens, .experts = experts, .scores = scores.data(), .prob_sum = sums.data()});
  DeviceVec<double> g_sums(gpu, std::vector<double>(experts, 1.5));
  gpu.balance_prob_sums({.tokens = tokens, .experts = experts, .scores = d_scores.get(), .prob_sum = g_sums.get()});
  rep.check("balance_prob_sums" + name, relative_error(g_sums.download(), sums), 1e-12);

  std::vector<double> gf(experts);
  std::vector<double> global_sum{0.5};
  mt::GlobalBalanceArgs gb{.experts = experts, .top_k = top_k, .tokens = tokens, .alpha = 0.01f, .load = load.data(),
                           .prob_sum = sums.data(), .f = gf.data(), .sum = global_sum.data()};
  cpu.global_balance(gb);
  const double global = global_sum[0];
  DeviceVec<double> d_load(gpu, load), d_sums(gpu, sums), g_gf(gpu, poison<double>(experts));
  DeviceVec<double> g_global_sum(gpu, std::vector<double>{0.5});
  gb.load = d_load.get(), gb.prob_sum = d_sums.get(), gb.f = g_gf.get(), gb.sum = g_global_sum.get();
  gpu.global_balance(gb);
  const double g_global = g_global_sum.download()[0];
  rep.check("global_balance f" + name, relative_error(g_gf.download(), gf), 1e-12);
  rep.check("global_balance value" + name, std::fabs(g_global - global) / std::fabs(global), 1e-12);

  std::vector<float> b = bias;
  cpu.bias_update({.experts = experts, .gamma = 0.001f, .load = load.data(), .bias = b.data()});
  DeviceVec<float> g_b(gpu, bias);
  gpu.bias_update({.experts = experts, .gamma = 0.001f, .load = d_load.get(), .bias = g_b.get()});
  rep.check("bias_update" + name, relative_error(g_b.download(), b), 0);
}

void check_rows(Report& rep, const Backend& cpu, const Backend& gpu, int tokens, int top_k, int dim, uint64_t seed) {
  Lcg rng(seed);
  const int pairs = tokens * top_k;
  const std::string name = " tokens=" + std::to_string(tokens) + " top_k=" + std::to_string(top_k) + " dim=" +
                           std::to_string(dim);
  std::vector<int> slot(pairs);
  for (int i = 0; i < pairs; ++i) slot[i] = int((size_t(i) * 7919) % size_t(pairs));  // a permutation: 7919 is prime
  const std::vector<float> rows = random_values(size_t(pairs) * dim, rng), gates = random_values(pairs, rng);
  const std::vector<float> y0 = random_values(size_t(tokens) * dim, rng), dy = random_values(size_t(tokens) * dim, rng);
  DeviceVec<int> d_slot(gpu, slot);
  DeviceVec<float> d_rows(gpu, rows), d_gates(gpu, gates), d_dy(gpu, dy);

  std::vector<float> gathered(size_t(pairs) * dim);
  cpu.gather_rows({.rows = pairs, .cols = dim, .src = rows.data(), .index = slot.data(), .dst = gathered.data()});
  DeviceVec<float> g_gathered(gpu, poison<float>(gathered.size()));
  gpu.gather_rows({.rows = pairs, .cols = dim, .src = d_rows.get(), .index = d_slot.get(), .dst = g_gathered.get()});
  rep.check("gather_rows" + name, relative_error(g_gathered.download(), gathered), 0);
  // Into bfloat16 (rounded, to nearest even on both sides), then bfloat16 rows again (copied).
  std::vector<mt::Bf16> g16(gathered.size()), again16(gathered.size());
  cpu.gather_rows({.rows = pairs, .cols = dim, .src = rows.data(), .index = slot.data(), .dst_bf16 = g16.data()});
  cpu.gather_rows({.rows = pairs, .cols = dim, .index = slot.data(), .src_bf16 = g16.data(), .dst_bf16 = again16.data()});
  DeviceVec<mt::Bf16> d_g16(gpu, std::vector<mt::Bf16>(g16.size(), mt::Bf16{0x7fc1}));
  DeviceVec<mt::Bf16> d_again16(gpu, std::vector<mt::Bf16>(g16.size(), mt::Bf16{0x7fc1}));
  gpu.gather_rows({.rows = pairs, .cols = dim, .src = d_rows.get(), .index = d_slot.get(), .dst_bf16 = d_g16.get()});
  gpu.gather_rows({.rows = pairs, .cols = dim, .index = d_slot.get(), .src_bf16 = d_g16.get(), .dst_bf16 = d_again16.get()});
  const std::vector<mt::Bf16> got16 = d_g16.download(), got_again = d_again16.download();
  size_t differ = 0;
  for (size_t i = 0; i < g16.size(); ++i) differ += (got16[i].bits != g16[i].bits) + (got_again[i].bits != again16[i].bits);
  rep.check("gather_rows into bfloat16 and of bfloat16 rows, elements that differ" + name, double(differ), 0);

  for (bool gated : {true, false}) {
    std::vector<float> y = y0;
    cpu.moe_combine({.tokens = tokens, .top_k = top_k, .dim = dim, .rows = rows.data(), .slot_row = slot.data(),
                     .gates = gated ? gates.data() : nullptr, .y = y.data()});
    DeviceVec<float> g_y(gpu, y0);
    gpu.moe_combine({.tokens = tokens, .top_k = top_k, .dim = dim, .rows = d_rows.get(), .slot_row = d_slot.get(),
                     .gates = gated ? d_gates.get() : nullptr, .y = g_y.get()});
    rep.check(std::string("moe_combine") + (gated ? " gated" : " summed") + name, relative_error(g_y.download(), y),
              1e-6);
  }
  std::vector<float> drows(size_t(pairs) * dim), dgate(pairs);
  cpu.moe_combine_backward({.tokens = tokens, .top_k = top_k, .dim = dim, .dy = dy.data(), .rows = rows.data(),
                            .slot_row = slot.data(), .gates = gates.data(), .drows = drows.data(),
                            .dgate = dgate.data()});
  DeviceVec<float> g_drows(gpu, poison<float>(drows.size())), g_dgate(gpu, poison<float>(pairs));
  gpu.moe_combine_backward({.tokens = tokens, .top_k = top_k, .dim = dim, .dy = d_dy.get(), .rows = d_rows.get(),
                            .slot_row = d_slot.get(), .gates = d_gates.get(), .drows = g_drows.get(),
                            .dgate = g_dgate.get()});
  rep.check("moe_combine_backward drows" + name, relative_error(g_drows.download(), drows), 0);
  rep.check("moe_combine_backward dgate" + name, relative_error(g_dgate.download(), dgate), 1e-6);
}

void check_grouped_gemm(Report& rep, const Backend& cpu, const Backend& gpu, const std::vector<int>& offsets, int n,
                        int k, mt::GemmPrecision inputs, uint64_t seed) {
  Lcg rng(seed);
  const int groups = int(offsets.size()) - 1, rows = offsets.back();
  const std::string name = std::string(inputs == mt::GemmPrecision::bf16 ? " bf16" : " fp32") + " groups=" +
                           std::to_string(groups) + " rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k);
  const double tol = 1e-4;
  const std::vector<float> a = random_values(size_t(rows) * k, rng), w = random_values(size_t(groups) * n * k, rng);
  const std::vector<float> c0 = random_values(size_t(rows) * n, rng);
  DeviceVec<float> d_a(gpu, a), d_w(gpu, w);
  DeviceVec<int> d_offsets(gpu, offsets);  // the offsets each side reads from its own memory
  for (bool trans_b : {true, false})
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> c = c0;
      mt::GroupedGemmArgs g{.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::rows, .m = rows, .n = n,
                            .k = k,
                            .a = a.data(), .b = w.data(), .trans_b = trans_b, .c = c.data(), .beta = beta,
                            .inputs = inputs};
      cpu.grouped_gemm(g);
      DeviceVec<float> g_c(gpu, beta == 0.0f ? poison<float>(c0.size()) : c0);
      g.a = d_a.get(), g.b = d_w.get(), g.c = g_c.get(), g.offsets = d_offsets.get();
      gpu.grouped_gemm(g);
      rep.check("grouped_gemm rows trans_b=" + std::to_string(trans_b) + " beta=" + std::to_string(int(beta)) + name,
                relative_error(g_c.download(), c), tol);
    }
  const std::vector<float> x = random_values(size_t(rows) * n, rng), dw0 = random_values(size_t(groups) * k * n, rng);
  const std::vector<float> dy = random_values(size_t(rows) * k, rng);
  std::vector<float> dw = dw0;
  mt::GroupedGemmArgs g{.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::reduce, .m = k, .n = n,
                        .k = rows, .a = dy.data(), .b = x.data(), .c = dw.data(), .beta = 1.0f, .inputs = inputs};
  cpu.grouped_gemm(g);
  DeviceVec<float> d_dy(gpu, dy), d_x(gpu, x), g_dw(gpu, dw0);
  g.a = d_dy.get(), g.b = d_x.get(), g.c = g_dw.get(), g.offsets = d_offsets.get();
  gpu.grouped_gemm(g);
  rep.check("grouped_gemm reduce" + name, relative_error(g_dw.download(), dw), tol);
  if (inputs != mt::GemmPrecision::bf16) return;
  // An activation stored in bfloat16 (precision.bf16_activations): A of the rows form, B of the
  // reduce form, the same bits on both sides.
  std::vector<mt::Bf16> a16(a.size()), x16(x.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i].bits = mt::float_to_bf16_bits(a[i]);
  for (size_t i = 0; i < x.size(); ++i) x16[i].bits = mt::float_to_bf16_bits(x[i]);
  DeviceVec<mt::Bf16> d_a16(gpu, a16), d_x16(gpu, x16);
  std::vector<float> c(size_t(rows) * n);
  mt::GroupedGemmArgs r{.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::rows, .m = rows, .n = n,
                        .k = k,
                        .b = w.data(), .trans_b = true, .c = c.data(), .inputs = inputs, .a_bf16 = a16.data()};
  cpu.grouped_gemm(r);
  DeviceVec<float> g_c(gpu, poison<float>(c.size()));
  r.b = d_w.get(), r.c = g_c.get(), r.a_bf16 = d_a16.get(), r.offsets = d_offsets.get();
  gpu.grouped_gemm(r);
  rep.check("grouped_gemm rows, A stored in bfloat16" + name, relative_error(g_c.download(), c), tol);
  std::vector<float> dw16 = dw0;
  mt::GroupedGemmArgs red{.groups = groups, .offsets = offsets.data(), .ragged = mt::Ragged::reduce, .m = k, .n = n,
                          .k = rows, .a = dy.data(), .c = dw16.data(), .beta = 1.0f, .inputs = inputs,
                          .b_bf16 = x16.data()};
  cpu.grouped_gemm(red);
  DeviceVec<float> g_dw16(gpu, dw0);
  red.a = d_dy.get(), red.c = g_dw16.get(), red.b_bf16 = d_x16.get(), red.offsets = d_offsets.get();
  gpu.grouped_gemm(red);
  rep.check("grouped_gemm reduce, B stored in bfloat16" + name, relative_error(g_dw16.download(), dw16), tol);
}

// The order of the rows an expert-parallel rank receives, from random counts (some zero).
void check_arrivals(Report& rep, const Backend& cpu, const Backend& gpu, int sources, int local, uint64_t seed) {
  Lcg rng(seed);
  const std::string name = " sources=" + std::to_string(sources) + " local=" + std::to_string(local);
  std::vector<int> counts(size_t(sources) * local);
  for (int& c : counts) c = std::max(0, int(rng.next(-20.0f, 40.0f)));
  int rows = 0;
  for (int c : counts) rows += c;
  std::vector<int> begin(local + 1), local_of(rows), arrival_of(rows);
  mt::MoeArrivalsArgs a{.sources = sources, .local = local, .rows = rows, .counts = counts.data(),
                        .local_begin = begin.data(), .local_of = local_of.data(), .arrival_of = arrival_of.data()};
  cpu.moe_arrivals(a);
  DeviceVec<int> d_counts(gpu, counts), g_begin(gpu, poison<int>(local + 1)), g_local(gpu, poison<int>(rows)),
      g_arrival(gpu, poison<int>(rows));
  a.counts = d_counts.get(), a.local_begin = g_begin.get(), a.local_of = g_local.get();
  a.arrival_of = g_arrival.get();
  gpu.moe_arrivals(a);
  rep.check("moe_arrivals local_begin" + name, relative_error(g_begin.download(), begin), 0);
  rep.check("moe_arrivals local_of" + name, relative_error(g_local.download(), local_of), 0);
  rep.check("moe_arrivals arrival_of" + name, relative_error(g_arrival.download(), arrival_of), 0);
}

void check_update(Report& rep, const Backend& cpu, const Backend& gpu, size_t n, uint64_t seed) {
  Lcg rng(seed);
  const std::string name = " n=" + std::to_string(n);
  const std::vector<float> g = random_values(n, rng), value = random_values(n, rng), m = random_values(n, rng, -0.1f, 0.1f);
  const std::vector<float> v = random_values(n, rng, 0.0f, 0.01f);
  DeviceVec<float> d_g(gpu, g);
  // Three runs of the vector (the middle one empty) on top of 1.0; then the clipping they decide.
  const std::vector<size_t> lengths{n / 3, 0, n - n / 3};
  const std::vector<const float*> runs{g.data(), g.data() + n / 3, g.data() + n / 3};
  std::vector<double> ss{1.0};
  cpu.sum_squares({.runs = 3, .x = runs.data(), .n = lengths.data(), .sum = ss.data(), .total = n});
  const std::vector<const float*> g_runs{d_g.get(), d_g.get() + n / 3, d_g.get() + n / 3};
  DeviceVec<const float*> d_runs(gpu, g_runs);
  DeviceVec<size_t> d_lengths(gpu, lengths);
  DeviceVec<double> g_ss(gpu, std::vector<double>{1.0});
  gpu.sum_squares({.runs = 3, .x = d_runs.get(), .n = d_lengths.get(), .sum = g_ss.get(), .total = n});
  rep.check("sum_squares" + name, std::fabs(g_ss.download()[0] - ss[0]) / ss[0], 1e-12);
  std::vector<float> clipped = g;
  const double clip = 0.5 * std::sqrt(ss[0]);
  cpu.scale({.n = n, .x = clipped.data(), .norm_sq = ss.data(), .clip = clip});
  DeviceVec<float> g_clipped(gpu, g);
  gpu.scale({.n = n, .x = g_clipped.get(), .norm_sq = g_ss.get(), .clip = clip});
  rep.check("scale by the device norm" + name, relative_error(g_clipped.download(), clipped), 1e-6);

  std::vector<float> scaled = g;
  cpu.scale({.n = n, .factor = 0.37f, .x = scaled.data()});
  DeviceVec<float> g_scaled(gpu, g);
  gpu.scale({.n = n, .factor = 0.37f, .x = g_scaled.get()});
  rep.check("scale" + name, relative_error(g_scaled.download(), scaled), 0);

  std::vector<float> cv = value, cm = m, cvv = v;
  // The step's coefficients as the kernel reads them: four doubles in device memory.
  const mt::AdamwStepValues step{.lr = 3e-3, .bias_correction1 = 0.271, .bias_correction2 = 0.0975, .decay = 3e-4f};
  static_assert(sizeof step == 4 * sizeof(double));
  mt::AdamwArgs a{.n = n, .step = &step, .decay = true, .eps = 1e-8, .beta1 = 0.9f, .beta2 = 0.95f,
                  .grad = g.data(), .value = cv.data(), .m = cm.data(), .v = cvv.data()};
  cpu.adamw(a);
  DeviceVec<float> gv(gpu, value), gm(gpu, m), gvv(gpu, v);
  DeviceVec<double> d_step(gpu, {step.lr, step.bias_correction1, step.bias_correction2, step.decay});
  a.step = reinterpret_cast<const mt::AdamwStepValues*>(d_step.get());
  a.grad = d_g.get(), a.value = gv.get(), a.m = gm.get(), a.v = gvv.get();
  gpu.adamw(a);
  rep.check("adamw value" + name, relative_error(gv.download(), cv), 1e-6);
  rep.check("adamw moments" + name,
            std::max(relative_error(gm.download(), cm), relative_error(gvv.download(), cvv)), 1e-6);
  // The step's scalars: a sum in order, and the loss check (scale 0) that turns infinity into NaN.
  const std::vector<double> scalars{0.5, 1e300, -1e300, 0.25, INFINITY};
  DeviceVec<double> d_scalars(gpu, scalars), sums(gpu, std::vector<double>{2.0, 0.0});
  std::vector<double> want{2.0, 0.0};
  for (int i = 0; i < 4; ++i) want[0] += scalars[size_t(i)];
  gpu.sum_scalars({.n = 4, .x = d_scalars.get(), .sum = sums.get()});
  gpu.sum_scalars({.n = 5, .x = d_scalars.get(), .scale = 0.0, .sum = sums.get() + 1});
  const std::vector<double> got = sums.download();
  rep.check("sum_scalars" + name, (got[0] == want[0] && std::isnan(got[1])) ? 0.0 : 1.0, 0);
  // A step whose loss check is NaN leaves everything as it was.
  DeviceVec<double> failed(gpu, std::vector<double>{1.0, NAN});
  a.guard = failed.get();
  gpu.adamw(a);
  rep.check("adamw skipped by its guard" + name, relative_error(gv.download(), cv), 1e-6);

  // The memory entries: a device-to-device copy and zeroing.
  DeviceVec<float> copied(gpu, poison<float>(n));
  gpu.copy(copied.get(), d_g.get(), n * sizeof(float));
  rep.check("copy" + name, relative_error(copied.download(), g), 0);
  gpu.zero(copied.get(), n * sizeof(float));
  rep.check("zero" + name, relative_error(copied.download(), std::vector<float>(n, 0.0f)), 0);
}

void check_shift(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int seq, int shift) {
  std::vector<int> tokens(rows), targets(rows), out(rows), out_t(rows);
  for (int r = 0; r < rows; ++r) tokens[r] = r * 3 % 101, targets[r] = (r * 5 + 1) % 101;
  cpu.shift_tokens({.rows = rows, .seq = seq, .shift = shift, .tokens = tokens.data(), .targets = targets.data(),
                    .tokens_out = out.data(), .targets_out = out_t.data()});
  DeviceVec<int> d_tokens(gpu, tokens), d_targets(gpu, targets), g_out(gpu, poison<int>(rows)), g_out_t(gpu, poison<int>(rows));
  gpu.shift_tokens({.rows = rows, .seq = seq, .shift = shift, .tokens = d_tokens.get(), .targets = d_targets.get(),
                    .tokens_out = g_out.get(), .targets_out = g_out_t.get()});
  rep.check("shift_tokens rows=" + std::to_string(rows) + " shift=" + std::to_string(shift),
            std::max(relative_error(g_out.download(), out), relative_error(g_out_t.download(), out_t)), 0);
}

void check_fp8_rows(Report& rep, const Backend& cpu, const Backend& gpu, int rows, int cols, Fp8Format format,
                    uint64_t seed) {
  Lcg rng(seed);
  const std::string name = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                           (format == Fp8Format::e4m3 ? " e4m3" : " e5m2");
  const std::vector<float> x = random_values(size_t(rows) * cols, rng, -30.0f, 30.0f);
  const size_t packed_floats = size_t(rows) * mt::fp8_packed_row_floats(cols, 128);
  std::vector<float> packed(packed_floats), back(x.size());
  mt::Fp8PackRowsArgs pack{.rows = rows, .cols = cols, .tile = 128, .format = format, .pow2_scales = true,
                           .x = x.data(), .packed = packed.data()};
  cpu.fp8_pack_rows(pack);
  DeviceVec<float> d_x(gpu, x), g_packed(gpu, poison<float>(packed_floats));
  pack.x = d_x.get(), pack.packed = g_packed.get();
  gpu.fp8_pack_rows(pack);
  const std::vector<float> got = g_packed.download();
  rep.check("fp8_pack_rows (bytes)" + name, std::memcmp(got.data(), packed.data(), packed_floats * 4) == 0 ? 0 : 1, 0);
  mt::Fp8UnpackRowsArgs unpack{.rows = rows, .cols = cols, .tile = 128, .format = format, .packed = packed.data(),
                               .x = back.data()};
  cpu.fp8_unpack_rows(unpack);
  DeviceVec<float> d_packed(gpu, packed), g_back(gpu, poison<float>(x.size()));
  unpack.packed = d_packed.get(), unpack.x = g_back.get();
  gpu.fp8_unpack_rows(unpack);
  rep.check("fp8_unpack_rows" + name, relative_error(g_back.download(), back), 0);
}

}  // namespace

void group_routing(const Context& c, uint64_t seed) {
  // DeepSeek-V3's routing shape (256 experts in 8 groups, 4 chosen, top 8) and small odd ones.
  check_routing(c.rep, c.cpu, c.gpu, 4096, 256, 8, 8, 4, seed++);
  check_routing(c.rep, c.cpu, c.gpu, 1000, 64, 6, 8, 3, seed++);
  check_routing(c.rep, c.cpu, c.gpu, 48, 6, 1, 1, 1, seed++);
  check_arrivals(c.rep, c.cpu, c.gpu, 8, 32, seed++);  // DeepSeek-V3's 256 experts over ep = 8
  check_arrivals(c.rep, c.cpu, c.gpu, 3, 1, seed++);
}

void group_moe_rows(const Context& c, uint64_t seed) {
  check_rows(c.rep, c.cpu, c.gpu, 4096, 8, 7168 / 8, seed++);
  check_rows(c.rep, c.cpu, c.gpu, 37, 3, 33, seed++);
}

void group_grouped_gemm(const Context& c, uint64_t seed) {
  // 64 groups, some empty: more operand pointers than one launch of the pointer writer carries.
  std::vector<int> many{0};
  for (int g = 0; g < 64; ++g) many.push_back(many.back() + (g * 7) % 13);
  for (mt::GemmPrecision inputs : {mt::GemmPrecision::fp32, mt::GemmPrecision::bf16}) {
    check_grouped_gemm(c.rep, c.cpu, c.gpu, {0, 100, 100, 357, 1000}, 96, 64, inputs, seed++);
    check_grouped_gemm(c.rep, c.cpu, c.gpu, {0, 0, 1, 1, 9}, 17, 33, inputs, seed++);
    check_grouped_gemm(c.rep, c.cpu, c.gpu, many, 40, 24, inputs, seed++);
  }
}

void group_optimizer(const Context& c, uint64_t seed) {
  check_update(c.rep, c.cpu, c.gpu, 1, seed++);
  check_update(c.rep, c.cpu, c.gpu, 1000003, seed++);
}

void group_shift_tokens(const Context& c, uint64_t) {
  check_shift(c.rep, c.cpu, c.gpu, 12 * 37, 37, 1);
  check_shift(c.rep, c.cpu, c.gpu, 12 * 37, 37, 3);
}

void group_fp8_rows(const Context& c, uint64_t seed) {
  check_fp8_rows(c.rep, c.cpu, c.gpu, 4096, 7168 / 8, Fp8Format::e4m3, seed++);
  check_fp8_rows(c.rep, c.cpu, c.gpu, 33, 300, Fp8Format::e5m2, seed++);
}

}  // namespace parity
