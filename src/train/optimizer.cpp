#include "train/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "train/adamw.hpp"

namespace mt {

Optimizer::Optimizer(ParamStore& params, const OptimizerConfig& cfg, const ParallelGroups& groups, bool zero1)
    : params_(params), cfg_(cfg), g_(groups), zero1_(zero1 && groups.dp->size() > 1) {
  for (size_t i = 0; i < params.infos.size(); ++i) {
    by_name_.push_back(int(i));
    if (params.infos[i].name == "embedding") embedding_.push_back(int(i));
    const Spread s = params.infos[i].spread;
    (s == Spread::expert_split ? experts_ : dense_).push_back(int(i));
    if (s == Spread::tensor_partial) partial_.push_back(int(i));
  }
  // A DualPipe pair declares the same parameters in different orders: they exchange by name.
  std::sort(by_name_.begin(), by_name_.end(), [&](int a, int b) { return params.infos[a].name < params.infos[b].name; });
  size_t moments = 0;
  if (zero1_) {
    const size_t total = packed_size(dense_);
    const size_t ranks = size_t(g_.dp->size());
    shard_ = (total + ranks - 1) / ranks;
    packed_ = Buffer(be(), DType::f32, shard_ * ranks);
    shard_grad_ = Buffer(be(), DType::f32, shard_);
    const size_t lo = shard_ * size_t(g_.dp->rank()), hi = std::min(total, lo + shard_);
    size_t at = 0;  // packed offset of the parameter
    for (int id : dense_) {
      const size_t n = params.infos[id].numel, b = std::max(lo, at), e = std::min(hi, at + n);
      if (b < e) runs_.push_back({id, b - at, e - b, b - lo, true, b - lo});
      at += n;
    }
    moments = shard_;
    for (int id : experts_) {
      runs_.push_back({id, 0, params.infos[id].numel, moments, false, 0});
      moments += params.infos[id].numel;
    }
  } else {
    for (size_t i = 0; i < params.infos.size(); ++i) runs_.push_back({int(i), 0, params.infos[i].numel, params.infos[i].offset, false, 0});
    moments = params.total();
  }
  m_ = Buffer(be(), DType::f32, moments);
  v_ = Buffer(be(), DType::f32, moments);
}

size_t Optimizer::packed_size(const std::vector<int>& ids) const {
  size_t n = 0;
  for (int id : ids) n += params_.infos[id].numel;
  return n;
}

void Optimizer::pack(const std::vector<int>& ids, const float* from, float* to) const {
  size_t at = 0;
  for (int id : ids) {
    const ParamInfo& p = params_.infos[id];
    be().copy(to + at, from + p.offset, p.numel * sizeof(float));
    at += p.numel;
  }
}

void Optimizer::unpack(const std::vector<int>& ids, const float* from, float* to) const {
  size_t at = 0;
  for (int id : ids) {
    const ParamInfo& p = params_.infos[id];
    be().copy(to + p.offset, from + at, p.numel * sizeof(float));
    at += p.numel;
  }
}

void Optimizer::sum_over(const std::vector<int>& ids, DeviceComm& group) {
  Buffer buf(be(), DType::f32, packed_size(ids));
  pack(ids, params_.grads_data(), buf.f32());
  group.all_reduce_sum(device_span(buf));
  unpack(ids, buf.f32(), params_.grads_data());
}

double Optimizer::reduce_gradients() {
  float* grads = params_.grads_data();
  const int tp = g_.tp->size();
  if (g_.mirror->size() > 1) sum_over(by_name_, *g_.dev.mirror);
  if (g_.embedding->size() > 1) sum_over(embedding_, *g_.dev.embedding);
  if (tp > 1 && !partial_.empty()) sum_over(partial_, *g_.dev.tp);
  // The experts' sum travels while the dense parameters are summed.
  Buffer expert_buf;
  std::unique_ptr<Request> experts_summed;
  const bool sum_experts = !experts_.empty() && g_.expert_replicas->size() > 1;
  if (sum_experts) {
    expert_buf = Buffer(be(), DType::f32, packed_size(experts_));
    pack(experts_, grads, expert_buf.f32());
    experts_summed = g_.dev.expert_replicas->iall_reduce_sum(device_span(expert_buf));
  }
  if (zero1_) {
    pack(dense_, grads, packed_.f32());
    g_.dev.dp->reduce_scatter_sum(device_span(packed_), device_span(shard_grad_));
  } else if (g_.dp->size() > 1) {
    sum_over(dense_, *g_.dev.dp);
  }
  if (sum_experts) {
    experts_summed->wait();
    unpack(experts_, expert_buf.f32(), grads);
  }
  // Each element's gradient counts once: on its first copy, or under ZeRO-1 on the data-parallel
  // rank whose shard holds it (and the first tensor-parallel rank unless split there).
  std::vector<double> ss{0.0};
  for (const Run& r : runs_) {
    const ParamInfo& p = params_.infos[r.param];
    if (!first_copy(p, g_, r.sharded)) continue;
    const float* g = r.sharded ? shard_grad_.f32() + r.grad_offset : grads + p.offset + r.begin;
    ss[0] += be().sum_squares({.n = r.len, .x = g});
  }
  g_.world->all_reduce_sum(ss);
  return std::sqrt(ss[0]);
}

void Optimizer::scale_gradients(float factor) {
  be().scale({.n = params_.total(), .factor = factor, .x = params_.grads_data()});
  if (shard_grad_.count()) be().scale({.n = shard_grad_.count(), .factor = factor, .x = shard_grad_.f32()});
}

void Optimizer::step(double lr, long t) {
  for (const Run& r : runs_) {
    const ParamInfo& p = params_.infos[r.param];
    const float* grad = r.sharded ? shard_grad_.f32() + r.grad_offset : params_.grads_data() + p.offset + r.begin;
    const AdamwCoefficients c = adamw_coefficients(cfg_, lr, t, p.decay);
    be().adamw({.n = r.len, .lr = c.lr, .bias_correction1 = c.bias_correction1,
                .bias_correction2 = c.bias_correction2, .eps = c.eps, .beta1 = c.beta1, .beta2 = c.beta2,
                .decay = c.decay, .grad = grad, .value = params_.values_data() + p.offset + r.begin,
                .m = m_.f32() + r.moment, .v = v_.f32() + r.moment});
  }
  if (zero1_) {
    // Only this rank's shard is new: it goes out, every shard comes back.
    Buffer mine(be(), DType::f32, shard_);
    for (const Run& r : runs_)
      if (r.sharded)
        be().copy(mine.f32() + r.grad_offset, params_.values_data() + params_.infos[r.param].offset + r.begin,
                  r.len * sizeof(float));
    g_.dev.dp->all_gather(device_span(mine), device_span(packed_));
    unpack(dense_, packed_.f32(), params_.values_data());
  }
}

void Optimizer::export_moments(std::vector<float>& m, std::vector<float>& v) {
  for (auto [mine, full] : {std::pair{&m_, &m}, {&v_, &v}}) {
    const std::vector<float> here = mine->to_host_f32();
    full->assign(params_.total(), 0.0f);
    for (const Run& r : runs_)
      if (!r.sharded)
        std::copy_n(here.begin() + r.moment, r.len, full->begin() + params_.infos[r.param].offset + r.begin);
    if (zero1_) {
      const std::vector<float> shard(here.begin(), here.begin() + shard_);
      std::vector<float> all(shard_ * g_.dp->size());
      g_.dp->all_gather(shard, all);
      size_t at = 0;
      for (int id : dense_) {
        const ParamInfo& p = params_.infos[id];
        std::copy_n(all.begin() + at, p.numel, full->begin() + p.offset);
        at += p.numel;
      }
    }
  }
}

void Optimizer::import_moments(const std::vector<float>& m, const std::vector<float>& v) {
  for (auto [mine, full] : {std::pair{&m_, &m}, {&v_, &v}}) {
    std::vector<float> here(mine->count(), 0.0f);
    for (const Run& r : runs_)
      if (!r.sharded)
        std::copy_n(full->begin() + params_.infos[r.param].offset + r.begin, r.len, here.begin() + r.moment);
    if (zero1_) {
      size_t at = 0, lo = shard_ * size_t(g_.dp->rank());
      for (int id : dense_) {
        const ParamInfo& p = params_.infos[id];
        for (size_t i = 0; i < p.numel; ++i, ++at)
          if (at >= lo && at < lo + shard_) here[at - lo] = (*full)[p.offset + i];
      }
    }
    mine->from_host(here);
  }
}

}  // namespace mt
