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
    size_t total = 0;
    for (int id : dense_) total += params.infos[id].numel;
    const size_t ranks = size_t(g_.dp->size());
    shard_ = (total + ranks - 1) / ranks;
    packed_.assign(shard_ * ranks, 0.0f);
    shard_grad_.assign(shard_, 0.0f);
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
  m_.assign(moments, 0.0f);
  v_.assign(moments, 0.0f);
}

void Optimizer::pack(const std::vector<int>& ids, const std::vector<float>& from, std::vector<float>& to) const {
  size_t n = 0;
  for (int id : ids) n += params_.infos[id].numel;
  if (to.size() < n) to.resize(n);
  size_t at = 0;
  for (int id : ids) {
    const ParamInfo& p = params_.infos[id];
    std::copy(from.begin() + p.offset, from.begin() + p.offset + p.numel, to.begin() + at);
    at += p.numel;
  }
}

void Optimizer::unpack(const std::vector<int>& ids, const std::vector<float>& from, std::vector<float>& to) const {
  size_t at = 0;
  for (int id : ids) {
    const ParamInfo& p = params_.infos[id];
    std::copy(from.begin() + at, from.begin() + at + p.numel, to.begin() + p.offset);
    at += p.numel;
  }
}


double Optimizer::reduce_gradients() {
  std::vector<float>& grads = params_.grads;
  std::vector<float> buf;
  const int tp = g_.tp->size();
  if (g_.mirror->size() > 1) {
    pack(by_name_, grads, buf);
    g_.mirror->all_reduce_sum(buf);
    unpack(by_name_, buf, grads);
  }
  if (g_.embedding->size() > 1) {
    pack(embedding_, grads, buf);
    g_.embedding->all_reduce_sum(buf);
    unpack(embedding_, buf, grads);
  }
  if (tp > 1 && !partial_.empty()) {
    pack(partial_, grads, buf);
    g_.tp->all_reduce_sum(buf);
    unpack(partial_, buf, grads);
  }
  // The experts' sum travels while the dense parameters are summed.
  std::vector<float> expert_buf;
  std::unique_ptr<Request> experts_summed;
  const bool sum_experts = !experts_.empty() && (g_.expert_replicas->size() > 1 || tp > 1);
  if (sum_experts) {
    pack(experts_, grads, expert_buf);
    experts_summed = g_.expert_replicas->iall_reduce_sum(expert_buf);
  }
  if (zero1_) {
    pack(dense_, grads, packed_);
    g_.dp->reduce_scatter_sum(packed_, shard_grad_);
  } else if (g_.dp->size() > 1) {
    pack(dense_, grads, buf);
    g_.dp->all_reduce_sum(buf);
    unpack(dense_, buf, grads);
  }
  if (sum_experts) {
    experts_summed->wait();
    if (tp > 1)
      for (float& x : expert_buf) x /= float(tp);
    unpack(experts_, expert_buf, grads);
  }
  // Each element's gradient counts once: on its first copy, or under ZeRO-1 on the data-parallel
  // rank whose shard holds it (and the first tensor-parallel rank unless split there).
  std::vector<double> ss{0.0};
  auto add = [&](const float* g, size_t n) {
    for (size_t i = 0; i < n; ++i) ss[0] += double(g[i]) * g[i];
  };
  for (const Run& r : runs_) {
    const ParamInfo& p = params_.infos[r.param];
    if (!first_copy(p, g_, r.sharded)) continue;
    add(r.sharded ? shard_grad_.data() + r.grad_offset : grads.data() + p.offset + r.begin, r.len);
  }
  g_.world->all_reduce_sum(ss);
  return std::sqrt(ss[0]);
}

void Optimizer::scale_gradients(float factor) {
  for (float& g : params_.grads) g *= factor;
  for (float& g : shard_grad_) g *= factor;
}

void Optimizer::step(double lr, long t) {
  for (const Run& r : runs_) {
    const ParamInfo& p = params_.infos[r.param];
    const float* grad = r.sharded ? shard_grad_.data() + r.grad_offset : params_.grads.data() + p.offset + r.begin;
    adamw_update(adamw_coefficients(cfg_, lr, t, p.decay), r.len, grad, params_.values.data() + p.offset + r.begin,
                 m_.data() + r.moment, v_.data() + r.moment);
  }
  if (zero1_) {
    // Only this rank's shard is new: it goes out, every shard comes back.
    std::vector<float> mine(shard_, 0.0f);
    for (const Run& r : runs_)
      if (r.sharded)
        std::copy_n(params_.values.begin() + params_.infos[r.param].offset + r.begin, r.len, mine.begin() + r.grad_offset);
    g_.dp->all_gather(mine, packed_);
    unpack(dense_, packed_, params_.values);
  }
}

void Optimizer::export_moments(std::vector<float>& m, std::vector<float>& v) {
  for (auto [mine, full] : {std::pair{&m_, &m}, {&v_, &v}}) {
    full->assign(params_.total(), 0.0f);
    for (const Run& r : runs_)
      if (!r.sharded)
        std::copy_n(mine->begin() + r.moment, r.len, full->begin() + params_.infos[r.param].offset + r.begin);
    if (zero1_) {
      const std::vector<float> shard(mine->begin(), mine->begin() + shard_);
      std::vector<float> all(shard_ * g_.dp->size());
      g_.dp->all_gather(shard, all);
      unpack(dense_, all, *full);
    }
  }
}

void Optimizer::import_moments(const std::vector<float>& m, const std::vector<float>& v) {
  for (auto [mine, full] : {std::pair{&m_, &m}, {&v_, &v}}) {
    for (const Run& r : runs_)
      if (!r.sharded)
        std::copy_n(full->begin() + params_.infos[r.param].offset + r.begin, r.len, mine->begin() + r.moment);
    if (zero1_) {
      std::vector<float> all(shard_ * g_.dp->size(), 0.0f);
      pack(dense_, *full, all);
      std::copy_n(all.begin() + shard_ * g_.dp->rank(), shard_, mine->begin());
    }
  }
}

}  // namespace mt
