// MoE routing on the GPU: sigmoid, expert selection and the router's backward pass (one thread a
// token, running the per-token rules of src/ops/routing/math.hpp that the CPU reference runs
// too), the balance-loss statistics and the bias update. Sums over tokens run in the CPU
// reference's order wherever a single thread can own them (f, the probability sums, the
// global-batch loss, the mean load), so those are bitwise equal; the micro-batch loss is a
// block reduction (a different summation order, within the parity tolerance).
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/launch.cuh"
#include "ops/optimizer/math.hpp"
#include "ops/routing/math.hpp"
#include "ops/backend/reduce.cuh"

namespace mt::cuda {

namespace {

// x and y may be one buffer: no __restrict__.
__global__ void sigmoid_kernel(const float* x, float* y, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = 1.0f / (1.0f + expf(-x[i]));
}

__global__ void select_kernel(RouterSelectArgs a) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= a.tokens) return;
  routing::select_token(a.scores + size_t(t) * a.experts, a.bias, a.experts, a.top_k, a.n_groups, a.topk_groups,
                        a.route_scale, a.chosen + size_t(t) * a.top_k, a.gates + size_t(t) * a.top_k);
}

__global__ void router_backward_kernel(RouterBackwardArgs a) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= a.tokens) return;
  const double* f = a.f ? a.f + size_t(t / a.group) * a.f_stride : nullptr;
  const size_t row = size_t(t) * a.experts, pick = size_t(t) * a.top_k;
  routing::router_backward_token(a.scores + row, a.chosen + pick, a.gates + pick, a.dgate + pick, a.experts, a.top_k,
                                 a.route_scale, f, a.coef, a.dlogits + row);
}

// f[g, i] for every (group, expert): the CPU's sum of E/(K group) per routed pair, in its order.
__global__ void group_load_kernel(BalanceLossArgs a, int groups) {
  const size_t id = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= size_t(groups) * a.experts) return;
  const int g = int(id / a.experts), i = int(id % a.experts);
  const double step = double(a.experts) / (a.top_k * a.group);
  double f = 0;
  for (int t = g * a.group; t < (g + 1) * a.group; ++t)
    for (int k = 0; k < a.top_k; ++k)
      if (a.chosen[size_t(t) * a.top_k + k] == i) f += step;
  a.f[id] = f;
}

// Each token's term of the loss: sum_i alpha f[g,i] s_ti / T_t / group.
__global__ void token_loss_kernel(BalanceLossArgs a, double* terms) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= a.tokens) return;
  const float* s = a.scores + size_t(t) * a.experts;
  const double* f = a.f + size_t(t / a.group) * a.experts;
  double total = 0;
  for (int i = 0; i < a.experts; ++i) total += s[i];
  double term = 0;
  for (int i = 0; i < a.experts; ++i) term += a.alpha * f[i] * s[i] / total / a.group;
  terms[t] = term;
}

__global__ void token_totals_kernel(const float* scores, int tokens, int experts, double* totals) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  double total = 0;
  for (int i = 0; i < experts; ++i) total += scores[size_t(t) * experts + i];
  totals[t] = total;
}

__global__ void prob_sums_kernel(BalanceProbSumsArgs a, const double* totals) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.experts) return;
  double p = a.prob_sum[i];
  for (int t = 0; t < a.tokens; ++t) p += a.scores[size_t(t) * a.experts + i] / totals[t];
  a.prob_sum[i] = p;
}

// Few experts and once per step: one thread, in the CPU's order.
__global__ void global_balance_kernel(GlobalBalanceArgs a) {
  double sum = 0;
  for (int i = 0; i < a.experts; ++i) {
    a.f[i] = a.load[i] * a.experts / (double(a.top_k) * a.tokens);
    sum += a.alpha * a.f[i] * a.prob_sum[i] / a.tokens;
  }
  *a.sum += sum;
}

__global__ void bias_update_kernel(BiasUpdateArgs a) {
  if (!guard_passes(a.guard)) return;
  __shared__ double mean;
  if (threadIdx.x == 0) {
    double total = 0;
    for (int i = 0; i < a.experts; ++i) total += a.load[i];
    mean = total / a.experts;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.experts; i += blockDim.x) {
    if (a.load[i] < mean) a.bias[i] += a.gamma;
    else if (a.load[i] > mean) a.bias[i] -= a.gamma;
  }
}

}  // namespace

void sigmoid(DeviceState* s, const SigmoidArgs& a) {
  if (a.n == 0) return;
  activate(s);
  sigmoid_kernel<<<stride_grid(s, a.n, kBlock), kBlock, 0, s->stream>>>(a.x, a.y, a.n);
  MT_CUDA_CHECK_LAUNCH();
}

void router_select(DeviceState* s, const RouterSelectArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  select_kernel<<<blocks_for(a.tokens), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void router_backward(DeviceState* s, const RouterBackwardArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  router_backward_kernel<<<blocks_for(a.tokens), kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void balance_loss(DeviceState* s, const BalanceLossArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  const int groups = a.tokens / a.group;
  group_load_kernel<<<blocks_for(size_t(groups) * a.experts), kBlock, 0, s->stream>>>(a, groups);
  MT_CUDA_CHECK_LAUNCH();
  if (a.sum == nullptr) return;
  auto* terms = static_cast<double*>(scratch(s, kScratchReduce, size_t(a.tokens) * sizeof(double)));
  token_loss_kernel<<<blocks_for(a.tokens), kBlock, 0, s->stream>>>(a, terms);
  MT_CUDA_CHECK_LAUNCH();
  add_sum(s, terms, a.tokens, a.weight, 1.0, a.sum);
}

void balance_prob_sums(DeviceState* s, const BalanceProbSumsArgs& a) {
  if (a.tokens == 0) return;
  activate(s);
  auto* totals = static_cast<double*>(scratch(s, kScratchReduce, size_t(a.tokens) * sizeof(double)));
  token_totals_kernel<<<blocks_for(a.tokens), kBlock, 0, s->stream>>>(a.scores, a.tokens, a.experts, totals);
  MT_CUDA_CHECK_LAUNCH();
  prob_sums_kernel<<<blocks_for(a.experts), kBlock, 0, s->stream>>>(a, totals);
  MT_CUDA_CHECK_LAUNCH();
}

void global_balance(DeviceState* s, const GlobalBalanceArgs& a) {
  activate(s);
  global_balance_kernel<<<1, 1, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

void bias_update(DeviceState* s, const BiasUpdateArgs& a) {
  activate(s);
  bias_update_kernel<<<1, kBlock, 0, s->stream>>>(a);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mt::cuda
