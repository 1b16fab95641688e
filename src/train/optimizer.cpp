#include "train/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "ops/backend/mark.hpp"
#include "train/adamw.hpp"
#include "util/error.hpp"

namespace mt {

Optimizer::Optimizer(Model& model, const OptimizerConfig& cfg, const ParallelGroups& groups, int zero)
    : params_(model.params), model_(model), cfg_(cfg), g_(groups), zero_(groups.dp->size() > 1 ? zero : 0) {
  const ParamStore& params = params_;
  for (size_t i = 0; i < params.infos.size(); ++i) {
    by_name_.push_back(int(i));
    if (params.infos[i].name == "embedding") embedding_.push_back(int(i));
    const Spread s = params.infos[i].spread;
    (s == Spread::expert_split ? experts_ : dense_).push_back(int(i));
    if (s == Spread::tensor_partial) partial_.push_back(int(i));
  }
  // A DualPipe pair declares the same parameters in different orders: they exchange by name.
  std::sort(by_name_.begin(), by_name_.end(),
            [&](int a, int b) { return params.infos[a].name < params.infos[b].name; });
  pieces_.assign(params.infos.size(), {});
  size_t moments = 0;
  if (zero_ >= 1) {
    const size_t ranks = size_t(g_.dp->size());
    for (int id : by_name_)
      if (params.infos[id].spread != Spread::expert_split) sharded_.push_back(id);
    for (int id : sharded_) {
      pieces_[id] = {(params.infos[id].numel + ranks - 1) / ranks, shard_};
      shard_ += pieces_[id].size;
    }
    const int me = g_.dp->rank();
    for (int id : sharded_)
      if (const size_t len = piece_len(id, me))
        runs_.push_back({id, size_t(me) * pieces_[id].size, len, pieces_[id].at, true, pieces_[id].at});
    moments = shard_;
    for (int id : experts_) {
      runs_.push_back({id, 0, params.infos[id].numel, moments, false, 0});
      moments += params.infos[id].numel;
    }
    shard_grad_ = Buffer(be(), DType::f32, shard_);
    batch_ = zero_ == 1 ? shard_ : 0;
    if (zero_ >= 2) {
      // Each chunk's window fits its largest group; the packed buffer, the largest group's pieces.
      auto windows = [&](std::vector<std::vector<int>> (Model::*groups_of)(int) const, std::vector<Buffer>& out) {
        std::vector<bool> grouped(params.infos.size(), false);
        for (size_t c = 0; c < model.chunks().size(); ++c) {
          size_t most = 0;
          for (const std::vector<int>& group : (model.*groups_of)(int(c))) {
            size_t n = 0;
            for (int id : group)
              if (id >= 0 && sharded(id)) n += params.infos[id].numel, grouped[size_t(id)] = true;
            most = std::max(most, n);
            batch_ = std::max(batch_, pieces_size(group));
          }
          out.emplace_back(be(), DType::f32, most);
        }
        for (int id : sharded_) MT_CHECK(grouped[size_t(id)]);  // every parameter has a window to go to
      };
      windows(&Model::grad_groups, windows_);
      open_.resize(windows_.size());
      if (zero_ == 3) {
        windows(&Model::value_groups, value_windows_);
        gathered_.resize(value_windows_.size());
        shard_values_ = Buffer(be(), DType::f32, shard_);
        for (const Run& r : runs_)
          if (r.sharded)
            be().copy(shard_values_.f32() + r.grad_offset,
                      params_.values_data() + params.infos[r.param].offset + r.begin, r.len * sizeof(float));
        params_.release_values(sharded_);
      }
      received_ = Buffer(be(), DType::f32, batch_);
      params_.release_gradients(sharded_);
      model.set_shards(this, zero_ == 3);
    }
    packed_ = Buffer(be(), DType::f32, batch_ * ranks);
  } else {
    for (size_t i = 0; i < params.infos.size(); ++i)
      runs_.push_back({int(i), 0, params.infos[i].numel, params.infos[i].offset, false, 0});
    moments = params.total();
  }
  allocate_muon();
  m_ = Buffer(be(), DType::f32, moments);
  step_values_ = Buffer(be(), DType::u8, sizeof(AdamwStepValues));
  allocate_step_buffers();
}

void Optimizer::allocate_step_buffers() {
  auto total = [&](const std::vector<int>& ids) {
    size_t n = 0;
    for (int id : ids) n += gradient_size(id);
    return n;
  };
  size_t most = 0;
  if (g_.mirror->size() > 1) most = std::max(most, total(by_name_));
  if (g_.embedding->size() > 1) most = std::max(most, total(embedding_));
  if (g_.tp->size() > 1) most = std::max(most, total(partial_));
  if (zero_ == 0 && g_.dp->size() > 1) most = std::max(most, total(dense_));
  if (most) summed_ = Buffer(be(), DType::f32, most);
  if (!experts_.empty() && g_.expert_replicas->size() > 1) {
    size_t n = 0;
    for (int id : experts_) n += params_.infos[id].numel;
    experts_summed_ = Buffer(be(), DType::f32, n);
  }
  if (zero_ == 1 || zero_ == 2) gather_stage_ = Buffer(be(), DType::f32, batch_);
  // Each element's gradient counts once: on its first copy, or under ZeRO on the data-parallel
  // rank whose piece holds it (and the first tensor-parallel rank unless split there).
  std::vector<const float*> runs;
  std::vector<size_t> lengths;
  for (const Run& r : runs_) {
    const ParamInfo& p = params_.infos[r.param];
    if (!first_copy(p, g_, r.sharded)) continue;
    runs.push_back(r.sharded ? shard_grad_.f32() + r.grad_offset : params_.grads_data() + p.grad_offset + r.begin);
    lengths.push_back(r.len);
    norm_elements_ += r.len;
  }
  norm_run_count_ = int(runs.size());
  norm_runs_ = Buffer(be(), DType::u8, runs.size() * sizeof(const float*));
  norm_lengths_ = Buffer(be(), DType::u8, lengths.size() * sizeof(size_t));
  if (!runs.empty()) {
    be().upload(norm_runs_.raw(), runs.data(), norm_runs_.bytes());
    be().upload(norm_lengths_.raw(), lengths.data(), norm_lengths_.bytes());
  }
}

Optimizer::~Optimizer() {
  if (zero_ >= 2) model_.set_shards(nullptr, false);
}

size_t Optimizer::piece_len(int id, int rank) const {
  const size_t n = params_.infos[id].numel, piece = pieces_[id].size, begin = size_t(rank) * piece;
  return begin < n ? std::min(piece, n - begin) : 0;
}

size_t Optimizer::pieces_size(const std::vector<int>& ids) const {
  size_t n = 0;
  for (int id : ids)
    if (id >= 0) n += pieces_[id].size;
  return n;
}

template <class From>
void Optimizer::pack_pieces(const std::vector<int>& ids, From from, float* to) const {
  const size_t section = pieces_size(ids);
  for (int q = 0; q < g_.dp->size(); ++q) {
    float* out = to + size_t(q) * section;
    for (int id : ids) {
      if (id < 0 || !sharded(id)) continue;
      const size_t piece = pieces_[id].size, len = piece_len(id, q);
      if (len) be().copy(out, from(id) + size_t(q) * piece, len * sizeof(float));
      if (len < piece) be().zero(out + len, (piece - len) * sizeof(float));
      out += piece;
    }
  }
}

size_t Optimizer::gradient_floats() const {
  size_t n = params_.grads_total() + summed_.count() + experts_summed_.count();
  if (zero_ >= 2) {
    n += shard_grad_.count() + packed_.count() + received_.count();
    for (const Buffer& w : windows_) n += w.count();
  }
  return n;
}

size_t Optimizer::state_floats() const {
  return m_.count() + v_.count() + muon_update_.count() + muon_work_.count() + muon_full_.count() +
         muon_whole_.count() + muon_slices_.count() + (zero_ == 1 ? packed_.count() + shard_grad_.count() : 0);
}

size_t Optimizer::weight_floats() const {
  size_t n = params_.values_total() + shard_values_.count();
  for (const Buffer& w : value_windows_) n += w.count();
  return n;
}

void Optimizer::open(int chunk, const std::vector<int>& ids) {
  if (!accumulating_) {
    shard_grad_.zero();  // the first group of a step starts the pieces' sums
    accumulating_ = true;
  }
  std::vector<int>& open = open_[size_t(chunk)];
  open.clear();
  float* window = windows_[size_t(chunk)].f32();
  size_t at = 0;
  for (int id : ids)
    if (id >= 0 && sharded(id)) {
      params_.lend_gradient(id, window + at);
      at += params_.infos[id].numel;
      open.push_back(id);
    }
  // On the chunk's stream, which the previous close ordered after its use of the window.
  if (at) model_.backend(chunk).zero(window, at * sizeof(float));
}

void Optimizer::close(int chunk) {
  std::vector<int>& ids = open_[size_t(chunk)];
  if (ids.empty()) return;
  // Every close runs on the parameters' stream, so the pieces' sums never race between chunks.
  const Backend& work = model_.backend(chunk);
  order_after(be(), work);
  pack_pieces(ids, [&](int id) { return params_.grad(id); }, packed_.f32());  // the lent windows
  const size_t section = pieces_size(ids);
  g_.dev.dp->reduce_scatter_sum(device_span(packed_.f32(), section * size_t(g_.dp->size())),
                                device_span(received_.f32(), section));
  size_t off = 0;
  for (int id : ids) {
    be().add({.n = pieces_[id].size, .x = received_.f32() + off, .y = shard_grad_.f32() + pieces_[id].at});
    off += pieces_[id].size;
    params_.lend_gradient(id, nullptr);
  }
  order_after(work, be());  // the window is free again
  ids.clear();
}

void Optimizer::gather(int chunk, const std::vector<int>& ids) {
  std::vector<int>& here = gathered_[size_t(chunk)];
  here.clear();
  float* window = value_windows_[size_t(chunk)].f32();
  size_t n = 0;
  for (int id : ids)
    if (id >= 0 && sharded(id)) {
      params_.lend_value(id, window + n);
      n += params_.infos[id].numel;
      here.push_back(id);
    }
  if (here.empty()) return;
  // This rank's pieces go out, every rank's come back (on the parameters' stream, which the
  // last release ordered after the chunk's use of the window).
  all_gather_pieces(here, [&](int id) { return shard_values_.f32() + pieces_[id].at; }, received_.f32(),
                    [&](int id) { return params_.value(id); }, *g_.dev.dp);
  order_after(model_.backend(chunk), be());
}

void Optimizer::release(int chunk) {
  std::vector<int>& here = gathered_[size_t(chunk)];
  if (here.empty()) return;
  order_after(be(), model_.backend(chunk));  // the chunk's reads are done before the window is reused
  for (int id : here) params_.lend_value(id, nullptr);
  here.clear();
}

float* Optimizer::gradient_of(int id) const {
  return sharded(id) ? shard_grad_.f32() + pieces_[id].at : params_.grads_data() + params_.infos[id].grad_offset;
}

size_t Optimizer::gradient_size(int id) const { return sharded(id) ? pieces_[id].size : params_.infos[id].numel; }

float* Optimizer::value_of(const Run& r) const {
  if (r.sharded && zero_ == 3) return shard_values_.f32() + r.grad_offset;
  return params_.values_data() + params_.infos[r.param].value_offset + r.begin;
}

void Optimizer::sum_over(const std::vector<int>& ids, DeviceComm& group) {
  float* buf = summed_.f32();
  size_t at = 0;
  for (int id : ids)
    be().copy(buf + at, gradient_of(id), gradient_size(id) * sizeof(float)), at += gradient_size(id);
  group.all_reduce_sum(device_span(buf, at));
  at = 0;
  for (int id : ids)
    be().copy(gradient_of(id), buf + at, gradient_size(id) * sizeof(float)), at += gradient_size(id);
}

void Optimizer::reduce_gradients(double* guard) {
  accumulating_ = false;
  const float* grads = params_.grads_data();
  const int tp = g_.tp->size();
  // Sharded gradients are summed over dp first: the other sums then run on the pieces.
  if (zero_ == 1) {
    pack_pieces(sharded_, [&](int id) { return grads + params_.infos[id].grad_offset; }, packed_.f32());
    g_.dev.dp->reduce_scatter_sum(device_span(packed_), device_span(shard_grad_));
  }
  if (g_.mirror->size() > 1) sum_over(by_name_, *g_.dev.mirror);
  if (g_.embedding->size() > 1) sum_over(embedding_, *g_.dev.embedding);
  if (tp > 1 && !partial_.empty()) sum_over(partial_, *g_.dev.tp);
  // The experts' sum travels while the dense parameters are summed (without ZeRO).
  std::unique_ptr<Request> experts_summed;
  const Buffer& expert_buf = experts_summed_;
  if (!experts_.empty() && g_.expert_replicas->size() > 1) {
    size_t at = 0;
    for (int id : experts_) {
      be().copy(expert_buf.f32() + at, gradient_of(id), params_.infos[id].numel * sizeof(float));
      at += params_.infos[id].numel;
    }
    experts_summed = g_.dev.expert_replicas->iall_reduce_sum(device_span(expert_buf));
  }
  if (zero_ == 0 && g_.dp->size() > 1) sum_over(dense_, *g_.dev.dp);
  if (experts_summed) {
    experts_summed->wait();
    size_t at = 0;
    for (int id : experts_) {
      be().copy(gradient_of(id), expert_buf.f32() + at, params_.infos[id].numel * sizeof(float));
      at += params_.infos[id].numel;
    }
  }
  be().sum_squares({.runs = norm_run_count_, .x = static_cast<const float* const*>(norm_runs_.raw()),
                    .n = static_cast<const size_t*>(norm_lengths_.raw()), .sum = guard, .total = norm_elements_});
  if (g_.dev.world->size() > 1) g_.dev.world->all_reduce_sum({guard, 2, DType::f64});
}

void Optimizer::clip_gradients(const double* norm_sq, double clip) {
  be().scale({.n = params_.grads_total(), .x = params_.grads_data(), .norm_sq = norm_sq, .clip = clip});
  if (shard_grad_.count())
    be().scale({.n = shard_grad_.count(), .x = shard_grad_.f32(), .norm_sq = norm_sq, .clip = clip});
}

void Optimizer::load_step(double lr, long t) {
  const AdamwStepValues values = adamw_step_values(cfg_, lr, t);
  step_values_.upload(&values, sizeof values);
  if (muon_values_.count()) {
    const MuonStepValues muon = muon_step_values(cfg_, lr);
    muon_values_.upload(&muon, sizeof muon);
  }
}

void Optimizer::step(const double* guard) {
  const auto* values = static_cast<const AdamwStepValues*>(step_values_.raw());
  for (const Run& r : runs_) {
    if (muon_[size_t(r.param)].muon && r.sharded) {
      float* piece = shard_grad_.f32() + r.grad_offset;  // the momentum update replaces the gradient
      be().muon_momentum({.n = r.len, .momentum = float(cfg_.muon.momentum), .nesterov = cfg_.muon.nesterov,
                          .grad = piece, .buf = m_.f32() + r.moment, .update = piece, .guard = guard});
      continue;
    }
    if (muon_[size_t(r.param)].muon) {
      muon_step(r, guard);
      continue;
    }
    const ParamInfo& p = params_.infos[r.param];
    const float* grad = r.sharded ? shard_grad_.f32() + r.grad_offset : params_.grads_data() + p.grad_offset + r.begin;
    be().adamw({.n = r.len, .step = values, .decay = p.decay, .eps = cfg_.eps, .beta1 = float(cfg_.beta1),
                .beta2 = float(cfg_.beta2), .grad = grad, .value = value_of(r), .m = m_.f32() + r.moment,
                .v = v_.f32() + r.second, .guard = guard});
  }
  if (!muon_pieces_.empty()) muon_pieces_step(guard);
  if (zero_ == 1 || zero_ == 2) gather_weights();
  params_.values_updated();  // the GEMMs' bf16 copies and FP8 codes follow the new weights
}

template <class Mine, class To>
void Optimizer::all_gather_pieces(const std::vector<int>& ids, Mine mine, float* stage, To to, DeviceComm& dp) const {
  const int ranks = g_.dp->size(), me = g_.dp->rank();
  const size_t section = pieces_size(ids);
  size_t off = 0;
  for (int id : ids) {
    if (const size_t len = piece_len(id, me)) be().copy(stage + off, mine(id), len * sizeof(float));
    off += pieces_[id].size;
  }
  dp.all_gather(device_span(stage, section), device_span(packed_.f32(), section * size_t(ranks)));
  for (int q = 0; q < ranks; ++q) {
    const float* in = packed_.f32() + size_t(q) * section;
    for (int id : ids) {
      if (const size_t len = piece_len(id, q))
        be().copy(to(id) + size_t(q) * pieces_[id].size, in, len * sizeof(float));
      in += pieces_[id].size;
    }
  }
}

template void Optimizer::pack_pieces(const std::vector<int>&, IdPointer, float*) const;
template void Optimizer::all_gather_pieces(const std::vector<int>&, IdPointer, float*, IdPointer, DeviceComm&) const;

void Optimizer::gather_weights() {
  const size_t me = size_t(g_.dp->rank());
  float* values = params_.values_data();
  auto whole = [&](int id) { return values + params_.infos[id].value_offset; };
  for (size_t i = 0; i < sharded_.size();) {
    // Consecutive parameters whose pieces fit the packed buffer.
    std::vector<int> ids;
    size_t section = 0;
    for (; i < sharded_.size() && section + pieces_[sharded_[i]].size <= batch_; ++i) {
      ids.push_back(sharded_[i]);
      section += pieces_[sharded_[i]].size;
    }
    MT_CHECK(!ids.empty());
    // This rank's updated pieces go out, every rank's come back.
    all_gather_pieces(ids, [&](int id) { return whole(id) + me * pieces_[id].size; }, gather_stage_.f32(), whole,
                      *g_.dev.dp);
  }
}

template <class At>
void Optimizer::assemble(const std::vector<float>& stored, At at, const std::vector<float>& pieces,
                         std::vector<float>& full) const {
  full.assign(params_.total(), 0.0f);
  for (const Run& r : runs_)
    if (!r.sharded) std::copy_n(stored.begin() + at(r), r.len, full.begin() + params_.infos[r.param].offset + r.begin);
  if (zero_ == 0) return;
  std::vector<float> all(shard_ * g_.dp->size());
  g_.dp->all_gather(pieces, all);
  for (int q = 0; q < g_.dp->size(); ++q)
    for (int id : sharded_)
      std::copy_n(all.begin() + q * shard_ + pieces_[id].at, piece_len(id, q),
                  full.begin() + params_.infos[id].offset + q * pieces_[id].size);
}

void Optimizer::export_moments(std::vector<float>& m, std::vector<float>& v) {
  const std::vector<float> first = m_.to_host_f32(), seconds = v_.to_host_f32();
  std::vector<float> second(first.size(), 0.0f);  // in m_'s layout, zero for Muon's matrices
  for (const Run& r : runs_)
    if (!muon_[size_t(r.param)].muon) std::copy_n(seconds.begin() + r.second, r.len, second.begin() + r.moment);
  for (auto [here, full] : {std::pair{&first, &m}, {&second, &v}})
    assemble(*here, [](const Run& r) { return r.moment; }, std::vector<float>(here->begin(), here->begin() + shard_),
             *full);
}

std::vector<float> Optimizer::export_values() {
  if (zero_ < 3) return params_.host_values();
  std::vector<float> full;
  assemble(params_.host_stored_values(), [&](const Run& r) { return params_.infos[r.param].value_offset + r.begin; },
           shard_values_.to_host_f32(), full);
  return full;
}

void Optimizer::import_values(const std::vector<float>& values) {
  if (zero_ < 3) return params_.set_values(values);
  std::vector<float> pieces(shard_, 0.0f);
  for (const Run& r : runs_) {
    const float* from = values.data() + params_.infos[r.param].offset + r.begin;
    if (r.sharded) std::copy_n(from, r.len, pieces.begin() + r.grad_offset);
    else be().upload(value_of(r), from, r.len * sizeof(float));
  }
  shard_values_.from_host(pieces);
  params_.values_updated();
}

void Optimizer::import_moments(const std::vector<float>& m, const std::vector<float>& v) {
  std::vector<float> first(m_.count(), 0.0f), second(v_.count(), 0.0f);
  for (const Run& r : runs_) {  // a sharded run is this rank's piece
    const size_t at = params_.infos[r.param].offset + r.begin;
    std::copy_n(m.begin() + at, r.len, first.begin() + r.moment);
    if (!muon_[size_t(r.param)].muon) std::copy_n(v.begin() + at, r.len, second.begin() + r.second);
  }
  m_.from_host(first);
  v_.from_host(second);
}

}  // namespace mt
