#include "ops/backend/op_profile.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "ops/backend/device_timer.hpp"

namespace mt {

namespace {

enum Kind : int {
#define MT_KIND(op, ...) kind_##op,
  MT_OPS(MT_KIND)
#undef MT_KIND
  kind_copy, kind_zero, kind_count
};

const char* const kKindNames[] = {
#define MT_NAME(op, ...) #op,
    MT_OPS(MT_NAME)
#undef MT_NAME
    "copy", "zero"};

// Multiply-adds count two FLOPs. Causal attention computes half of each score matrix.
template <class A>
double flops_of(const A&) { return 0; }
double flops_of(const GemmArgs& a) { return 2.0 * a.m * a.n * a.k * a.batch; }
double flops_of(const GroupedGemmArgs& a) { return 2.0 * a.m * a.n * a.k; }
double flops_of(const AttentionForwardArgs& a) {
  return double(a.batch) * a.heads * a.seq * a.seq * (a.qk_dim + a.v_dim);  // QK^T and PV
}
double flops_of(const AttentionBackwardArgs& a) {
  return double(a.batch) * a.heads * a.seq * a.seq * (3.0 * a.qk_dim + 2.0 * a.v_dim);  // QK^T again, dV, dP, dQ, dK
}

// The least memory traffic of the ops whose speed is memory's (fp32: every value read or written
// once), for their GB/s beside the device's bandwidth; 0 where FLOPs, not bytes, set the pace.
template <class A>
double bytes_of(const A&) { return 0; }
constexpr double kF = sizeof(float);
// A value's bytes as stored: a bfloat16 one is 2.
double width(const void* bf16) { return bf16 ? 2.0 : kF; }
double bytes_of(const RmsNormForwardArgs& a) {
  const double x = a.residual ? width(a.x_bf16) + 2.0 * kF : kF;  // x (+ residual, sum)
  return a.rows * ((x + width(a.y_bf16)) * a.dim + kF);
}
double bytes_of(const RmsNormBackwardInputArgs& a) {
  return kF * a.rows * ((a.residual_grad ? 4.0 : 3.0) * a.dim + 1);
}
double bytes_of(const RmsNormBackwardWeightArgs& a) { return kF * a.rows * (2.0 * a.dim + 1); }
double bytes_of(const RopeArgs& a) {
  // every feature read, written in bfloat16
  if (a.out_bf16) return (width(a.x_bf16) + 2.0) * a.rows * a.heads * a.head_dim;
  return kF * 2.0 * a.rows * a.heads * a.rot_dim;
}
double bytes_of(const SwigluForwardArgs& a) {
  return double(a.n) * (width(a.gate_bf16) + width(a.up_bf16) + width(a.h_bf16));
}
double bytes_of(const SwigluBackwardArgs& a) {
  return double(a.n) * (width(a.gate_bf16) + width(a.up_bf16) + width(a.dh_bf16) + 2.0 * kF);
}
double bytes_of(const CrossEntropyArgs& a) { return kF * 2.0 * a.rows * a.vocab; }
double bytes_of(const EmbeddingForwardArgs& a) { return kF * 2.0 * a.rows * a.dim; }
double bytes_of(const EmbeddingBackwardArgs& a) { return kF * 3.0 * a.rows * a.dim; }
double bytes_of(const AddArgs& a) { return (width(a.y_bf16) + 2.0 * kF) * double(a.n); }
double bytes_of(const CopyColumnsArgs& a) {  // every group read; dst_group 0 writes one window
  const double window = double(a.rows) * a.cols, written = a.dst_group == 0 ? 1.0 : a.groups;
  return kF * window * (a.groups + written * (a.accumulate ? 2.0 : 1.0));
}
double bytes_of(const SigmoidArgs& a) { return kF * 2.0 * double(a.n); }
double bytes_of(const ScaleArgs& a) { return kF * 2.0 * double(a.n); }
double bytes_of(const SumSquaresArgs& a) { return kF * double(a.total); }
double bytes_of(const AdamwArgs& a) { return kF * 7.0 * double(a.n); }  // read w, g, m, v; write w, m, v

}  // namespace

struct OpProfile::State {
  Backend inner;
  OpTable table;
  std::vector<std::unique_ptr<DeviceTimer>> timers;
  std::vector<long long> calls;
  std::vector<double> flops, bytes;

  template <class F>
  auto timed(int kind, double flops_of_call, double bytes_of_call, F&& op) {
    ++calls[kind];
    flops[kind] += flops_of_call;
    bytes[kind] += bytes_of_call;
    timers[kind]->begin();
    if constexpr (std::is_void_v<decltype(op())>) {
      op();
      timers[kind]->end();
    } else {
      auto r = op();
      timers[kind]->end();
      return r;
    }
  }
};

namespace {

OpProfile::State& state(DeviceState* s) { return *reinterpret_cast<OpProfile::State*>(s); }

template <int K, auto Field, typename Fn>
struct Profiled;
template <int K, auto Field, typename R, typename A>
struct Profiled<K, Field, R (*)(DeviceState*, const A&)> {
  static R call(DeviceState* s, const A& a) {
    OpProfile::State& st = state(s);
    return st.timed(K, flops_of(a), bytes_of(a), [&] { return (st.inner.ops->*Field)(st.inner.state, a); });
  }
};
template <int K, auto Field>
constexpr auto profiled() {
  return &Profiled<K, Field, std::remove_cvref_t<decltype(cpu_ops().*Field)>>::call;
}

// The memory and mark entries pass straight through.
void* pass_alloc(DeviceState* s, size_t bytes) { return state(s).inner.alloc(bytes); }
void pass_release(DeviceState* s, void* p) { state(s).inner.release(p); }
void pass_upload(DeviceState* s, void* dst, const void* src, size_t n) { state(s).inner.upload(dst, src, n); }
void pass_download(DeviceState* s, void* dst, const void* src, size_t n) { state(s).inner.download(dst, src, n); }
void pass_sync(DeviceState* s) { state(s).inner.synchronize(); }
void* pass_mark_create(DeviceState* s) { return state(s).inner.mark_create(); }
void pass_mark_destroy(DeviceState* s, void* m) { state(s).inner.mark_destroy(m); }
void pass_mark_record(DeviceState* s, void* m) { state(s).inner.mark_record(m); }
double pass_mark_seconds(DeviceState* s, void* a, void* b) { return state(s).inner.mark_seconds(a, b); }
void pass_mark_wait(DeviceState* s, void* m) { state(s).inner.mark_wait(m); }
const FallbackCounts* pass_fallbacks(DeviceState* s) {
  const Backend& inner = state(s).inner;
  return inner.ops->fallbacks(inner.state);
}
void timed_copy(DeviceState* s, void* dst, const void* src, size_t n) {
  OpProfile::State& st = state(s);
  st.timed(kind_copy, 0, 2.0 * double(n), [&] { st.inner.copy(dst, src, n); });
}
void timed_zero(DeviceState* s, void* dst, size_t n) {
  OpProfile::State& st = state(s);
  st.timed(kind_zero, 0, double(n), [&] { st.inner.zero(dst, n); });
}

}  // namespace

OpProfile::OpProfile(const Backend& inner) : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.inner = inner;
  st.inner.counters = nullptr;  // the profiled backend counts each call once, where it enters
  OpTable& t = st.table;
  t.name = inner.ops->name;
  t.host_addressable = inner.ops->host_addressable;
  t.alloc = pass_alloc;
  t.release = pass_release;
  t.upload = pass_upload;
  t.download = pass_download;
  t.synchronize = pass_sync;
  t.copy = timed_copy;
  t.zero = timed_zero;
  t.mark_create = pass_mark_create;
  t.mark_destroy = pass_mark_destroy;
  t.mark_record = pass_mark_record;
  t.mark_seconds = pass_mark_seconds;
  t.mark_wait = pass_mark_wait;
  if (inner.ops->fallbacks) t.fallbacks = pass_fallbacks;
  // An entry the inner backend lacks stays empty, so missing_ops() still tells.
#define MT_PROFILED(op, ...) \
  if (inner.ops->op) t.op = profiled<kind_##op, &OpTable::op>();
  MT_OPS(MT_PROFILED)
#undef MT_PROFILED
  for (int k = 0; k < kind_count; ++k) st.timers.push_back(std::make_unique<DeviceTimer>(inner));
  st.calls.assign(kind_count, 0);
  st.flops.assign(kind_count, 0.0);
  st.bytes.assign(kind_count, 0.0);
  profiled_ = Backend{&st.table, reinterpret_cast<DeviceState*>(&st), inner.counters};
}

OpProfile::~OpProfile() = default;

std::vector<OpKindTime> OpProfile::take() {
  State& st = *state_;
  std::vector<OpKindTime> out;
  for (int k = 0; k < kind_count; ++k) {
    out.push_back({kKindNames[k], st.calls[k], st.timers[k]->take_seconds(), st.flops[k], st.bytes[k]});
    st.calls[k] = 0;
    st.flops[k] = 0;
    st.bytes[k] = 0;
  }
  return out;
}

void add_op_times(std::vector<OpKindTime>& sum, const std::vector<OpKindTime>& more) {
  if (sum.empty()) {
    sum = more;
    return;
  }
  for (size_t k = 0; k < sum.size() && k < more.size(); ++k) {
    sum[k].calls += more[k].calls;
    sum[k].seconds += more[k].seconds;
    sum[k].flops += more[k].flops;
    sum[k].bytes += more[k].bytes;
  }
}

std::string op_profile_table(std::vector<OpKindTime> total, int steps) {
  total.erase(std::remove_if(total.begin(), total.end(), [](const OpKindTime& t) { return t.calls == 0; }),
              total.end());
  std::sort(total.begin(), total.end(), [](const OpKindTime& a, const OpKindTime& b) { return a.seconds > b.seconds; });
  double all = 0;
  for (const OpKindTime& t : total) all += t.seconds;
  const double n = std::max(1, steps);
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "profile  per step, mean of %d step(s); op kinds by device time\n", steps);
  out += line;
  std::snprintf(line, sizeof line, "  %-24s %8s %11s %7s %12s %10s\n", "op", "calls", "ms", "share", "GFLOP/s", "GB/s");
  out += line;
  for (const OpKindTime& t : total) {
    char rate[32] = "-", traffic[32] = "-";
    if (t.flops > 0 && t.seconds > 0) std::snprintf(rate, sizeof rate, "%.1f", t.flops / t.seconds * 1e-9);
    if (t.bytes > 0 && t.seconds > 0) std::snprintf(traffic, sizeof traffic, "%.1f", t.bytes / t.seconds * 1e-9);
    std::snprintf(line, sizeof line, "  %-24s %8.1f %11.3f %6.1f%% %12s %10s\n", t.name.c_str(), double(t.calls) / n,
                  t.seconds / n * 1e3, all > 0 ? 100.0 * t.seconds / all : 0.0, rate, traffic);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-24s %8s %11.3f %6.1f%%\n", "all ops", "", all / n * 1e3, 100.0);
  out += line;
  return out;
}

}  // namespace mt
