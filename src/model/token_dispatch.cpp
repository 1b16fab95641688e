#include "model/token_dispatch.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <numeric>

#include "model/ep_receive.hpp"
#include "util/error.hpp"

namespace mt {

TokenDispatcher::TokenDispatcher(const LayerEnv& env, int d_model, int experts, int top_k)
    : env_(env), d_(d_model), experts_(experts), top_k_(top_k) {}

GemmOperand TokenDispatcher::permute(Arena& arena, const int* chosen, int tokens, const float* x, double* load,
                                   DispatchSaved& s) {
  const Backend& be = env_.be();
  s.pairs = tokens * top_k_;
  s.expert_begin = arena.ints(size_t(experts_) + 1);
  s.perm_token = arena.ints(size_t(s.pairs));
  s.slot_row = arena.ints(size_t(s.pairs));
  be.moe_permute({.tokens = tokens, .top_k = top_k_, .experts = experts_, .chosen = chosen,
                  .expert_begin = s.expert_begin, .perm_token = s.perm_token, .slot_row = s.slot_row, .load = load});
  const size_t n = size_t(s.pairs) * d_;
  GatherRowsArgs gather{.rows = s.pairs, .cols = d_, .src = x, .index = s.perm_token};
  GemmOperand xe;
  if (env_.bf16_activations) xe = gather.dst_bf16 = arena.bf16s(n);
  else xe = gather.dst = arena.floats(n);
  be.gather_rows(gather);
  if (env_.shard.ep_size > 1) plan(arena, tokens, s);
  else s.rows = {.offsets = s.expert_begin, .count = s.pairs, .bound = s.pairs};
  return xe;
}

int TokenDispatcher::reserve(int tokens, int rows_in) {
  const EpReceive r{.ep = env_.shard.ep_size, .experts = experts_, .top_k = top_k_,
                    .bound = env_.shard.ep_receive_bound};
  const long worst = ep_worst_rows(r, tokens);
  MT_CHECK(rows_in <= worst);
  long bound = std::max(ep_reserved_rows(r, tokens), grown_);
  if (rows_in <= bound) return int(bound);
  // More arrived than parallel.ep_receive_bound keeps room for: the arena grows (one allocation)
  // rather than dropping rows, with an eighth to spare so that a need creeping up grows it a few
  // times, not every step.
  grown_ = bound = std::min(worst, long(rows_in) + rows_in / 8);
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr,
                 "warning: an MoE layer's all-to-all brought %d rows to expert-parallel rank %d, more than "
                 "parallel.ep_receive_bound = %g reserves (%ld rows); its arena grows to hold them (an allocation "
                 "inside the step, counted; later growth is not reported). parallel.ep_receive_bound = %.2f would "
                 "have held these (\"worst\" always does)\n",
                 rows_in, env_.shard.ep_rank, r.bound, ep_reserved_rows(r, tokens), ep_bound_for(r, tokens, rows_in));
  });
  return int(bound);
}

void TokenDispatcher::plan(Arena& arena, int tokens, DispatchSaved& s) {
  const int peers = env_.shard.ep_size, L = local_experts();
  std::vector<int> begin(size_t(experts_) + 1), counts_out(experts_), counts_in(experts_);
  const Backend& be = env_.be();
  be.download(begin.data(), s.expert_begin, begin.size() * sizeof(int));
  for (int e = 0; e < experts_; ++e) counts_out[e] = begin[e + 1] - begin[e];
  env_.shard.ep->host().all_to_all(counts_out, counts_in);  // counts_in[src * L + j]: rows from src for local expert j
  s.send_values.assign(peers, 0);
  s.recv_values.assign(peers, 0);
  int rows_in = 0;
  for (int q = 0; q < peers; ++q)
    for (int j = 0; j < L; ++j) {
      s.send_values[q] += counts_out[q * L + j] * d_;
      s.recv_values[q] += counts_in[q * L + j] * d_;
      rows_in += counts_in[q * L + j];
    }
  const int bound = reserve(tokens, rows_in);
  int* counts = arena.ints(size_t(experts_));
  be.upload(counts, counts_in.data(), counts_in.size() * sizeof(int));
  int* local_begin = arena.ints(size_t(L) + 1);
  s.local_of = arena.ints(size_t(bound));
  s.arrival_of = arena.ints(size_t(bound));
  be.moe_arrivals({.sources = peers, .local = L, .rows = rows_in, .counts = counts, .local_begin = local_begin,
                   .local_of = s.local_of, .arrival_of = s.arrival_of});
  s.rows = {.offsets = local_begin, .count = rows_in, .bound = bound};
}

void TokenDispatcher::exchange(Arena& arena, const DispatchSaved& s, GemmOperand in, float* out,
                               const ExpertsFn& experts, const std::function<void()>& meanwhile, bool fp8_rows) const {
  if (env_.shard.ep_size == 1) {
    meanwhile();
    experts(in, s.rows, out);
    return;
  }
  const Backend& be = env_.be();
  const size_t n_out = size_t(std::accumulate(s.send_values.begin(), s.send_values.end(), 0));
  const size_t n_in = size_t(s.rows.count) * d_, room = size_t(s.rows.bound) * d_;
  // The rows as they arrive, then in local expert order: fp32, or bfloat16 when they left so.
  GemmOperand local_in;
  if (in.bf16) {
    Bf16* arrival = arena.bf16s(room);
    std::vector<int> send(s.send_values.size()), recv(s.recv_values.size());  // in bytes
    for (size_t q = 0; q < send.size(); ++q) send[q] = s.send_values[q] * int(sizeof(Bf16));
    for (size_t q = 0; q < recv.size(); ++q) recv[q] = s.recv_values[q] * int(sizeof(Bf16));
    auto request = env_.shard.ep->iall_to_all_v(DeviceSpan{const_cast<Bf16*>(in.bf16), n_out * sizeof(Bf16), DType::u8},
                                                send, DeviceSpan{arrival, n_in * sizeof(Bf16), DType::u8}, recv);
    meanwhile();
    request->wait();
    Bf16* rows = arena.bf16s(room);
    be.gather_rows({.rows = s.rows.count, .cols = d_, .index = s.arrival_of, .src_bf16 = arrival, .dst_bf16 = rows});
    local_in = rows;
  } else {
    float* arrival = arena.floats(room);
    if (fp8_rows) {
      const Fp8Recipe& r = *env_.fp8;
      const int row_floats = fp8_packed_row_floats(d_, r.tile);
      std::vector<int> send(s.send_values.size()), recv(s.recv_values.size());
      for (size_t q = 0; q < send.size(); ++q) {
        send[q] = s.send_values[q] / d_ * row_floats;
        recv[q] = s.recv_values[q] / d_ * row_floats;
      }
      float* leaving = arena.floats(size_t(s.pairs) * row_floats);
      float* packed = arena.floats(size_t(s.rows.bound) * row_floats);
      be.fp8_pack_rows({.rows = s.pairs, .cols = d_, .tile = r.tile, .format = r.forward,
                        .pow2_scales = r.pow2_scales, .x = in.f32, .packed = leaving});
      auto request = env_.shard.ep->iall_to_all_v(device_span(leaving, size_t(s.pairs) * row_floats), send,
                                                  device_span(packed, size_t(s.rows.count) * row_floats), recv);
      meanwhile();
      request->wait();
      be.fp8_unpack_rows({.rows = s.rows.count, .cols = d_, .tile = r.tile, .format = r.forward, .packed = packed,
                          .x = arrival});
    } else {
      auto request = env_.shard.ep->iall_to_all_v(device_span(in.f32, n_out), s.send_values,
                                                  device_span(arrival, n_in), s.recv_values);
      meanwhile();
      request->wait();
    }
    float* rows = arena.floats(room);
    be.gather_rows({.rows = s.rows.count, .cols = d_, .src = arrival, .index = s.arrival_of, .dst = rows});
    local_in = rows;
  }
  float* local_out = arena.floats(room);
  experts(local_in, s.rows, local_out);
  float* leaving = arena.floats(room);
  be.gather_rows({.rows = s.rows.count, .cols = d_, .src = local_out, .index = s.local_of, .dst = leaving});
  env_.shard.ep->all_to_all_v(device_span(leaving, n_in), s.recv_values, device_span(out, n_out), s.send_values);
}

}  // namespace mt
