// Muon's side of the optimizer in every layout: which rank orthogonalises which matrix, and how the
// whole matrix is put together for the Newton-Schulz iteration and handed back (train/optimizer.hpp).
#include <algorithm>

#include "comm/timed_device_comm.hpp"
#include "ops/optimizer/newton_schulz.hpp"
#include "train/optimizer.hpp"
#include "util/error.hpp"

namespace mt {

bool Optimizer::tp_sliced(int id) const {
  return params_.infos[size_t(id)].spread == Spread::tensor_split && g_.tp->size() > 1;
}

void Optimizer::allocate_muon() {
  const ParamStore& params = params_;
  muon_.assign(params.infos.size(), {});
  muon_owner_.assign(params.infos.size(), -1);
  size_t update = 0, work = 0, whole = 0, slices = 0;
  for (size_t i = 0; i < params.infos.size(); ++i) {
    const MuonMatrix m = muon_matrix(params.infos[i], cfg_);
    if (!m.muon) continue;
    muon_[i] = m;
    work = std::max(work, size_t(m.count) * newton_schulz_work(m.rows, m.cols));
    if (!sharded(int(i))) update = std::max(update, params.infos[i].numel);
    if (tp_sliced(int(i))) {
      whole = std::max(whole, size_t(m.rows) * size_t(m.cols));
      if (params.infos[i].split_dim == 1) slices = std::max(slices, size_t(m.rows) * size_t(m.cols));
    }
  }
  // Each dense matrix in pieces goes to the data-parallel rank with the fewest elements so far.
  std::vector<size_t> load(size_t(g_.dp->size()), 0);
  for (int id : sharded_) {
    if (!muon_[size_t(id)].muon) continue;
    const auto least = std::min_element(load.begin(), load.end());
    muon_owner_[size_t(id)] = int(least - load.begin());
    *least += params.infos[size_t(id)].numel;
    muon_pieces_.push_back(id);
  }
  // AdamW's second moments, for the runs AdamW updates only.
  size_t seconds = 0;
  for (Run& r : runs_)
    if (!muon_[size_t(r.param)].muon) r.second = seconds, seconds += r.len;
  v_ = Buffer(be(), DType::f32, seconds);
  muon_dp_ = g_.dev.dp.get(), muon_tp_ = g_.dev.tp.get();
  if (!work) return;
  muon_values_ = Buffer(be(), DType::u8, sizeof(MuonStepValues));
  if (update) muon_update_ = Buffer(be(), DType::f32, update);
  muon_work_ = Buffer(be(), DType::f32, work);
  if (whole) muon_whole_ = Buffer(be(), DType::f32, whole);
  if (slices) muon_slices_ = Buffer(be(), DType::f32, slices);
  // ZeRO-1 gathers into the full gradients, idle after the reduce-scatter; ZeRO-2/3 have none.
  if (zero_ >= 2 && !muon_pieces_.empty()) muon_full_ = Buffer(be(), DType::f32, batch_ * size_t(g_.dp->size()));
}

void Optimizer::orthogonalise(int id, float* x) {
  const MuonMatrix& mx = muon_[size_t(id)];
  const MuonConfig& mc = cfg_.muon;
  const ParamInfo& p = params_.infos[size_t(id)];
  const bool sliced = tp_sliced(id);
  muon_calls_ += sliced;
  float* whole = sliced ? muon_whole_.f32() : x;
  const int tp = g_.tp->size(), me = g_.tp->rank(), cols = mx.cols / tp;
  if (sliced && p.split_dim == 0) {
    muon_tp_->all_gather(device_span(x, p.numel), device_span(whole, p.numel * size_t(tp)));
  } else if (sliced) {
    // Rank q's [rows, cols / tp] columns land at column q * cols / tp of the whole matrix.
    float* slices = muon_slices_.f32();
    muon_tp_->all_gather(device_span(x, p.numel), device_span(slices, p.numel * size_t(tp)));
    be().copy_columns({.rows = mx.rows, .cols = cols, .src = slices, .src_stride = cols, .dst = whole,
                       .dst_stride = mx.cols, .groups = tp, .src_group = mx.rows * cols, .dst_group = cols});
  }
  be().newton_schulz({.count = mx.count, .rows = mx.rows, .cols = mx.cols, .x = whole, .work = muon_work_.f32(),
                      .steps = mc.ns_steps, .a = float(mc.ns_a), .b = float(mc.ns_b), .c = float(mc.ns_c),
                      .eps = mc.eps});
  if (sliced && p.split_dim == 0) be().copy(x, whole + size_t(me) * p.numel, p.numel * sizeof(float));
  else if (sliced)
    be().copy_columns({.rows = mx.rows, .cols = cols, .src = whole + size_t(me) * cols, .src_stride = mx.cols,
                       .dst = x, .dst_stride = cols});
}

void Optimizer::muon_step(const Run& r, const double* guard) {
  const ParamInfo& p = params_.infos[size_t(r.param)];
  const MuonConfig& mc = cfg_.muon;
  float* update = muon_update_.f32();
  be().muon_momentum({.n = r.len, .momentum = float(mc.momentum), .nesterov = mc.nesterov,
                      .grad = params_.grads_data() + p.grad_offset, .buf = m_.f32() + r.moment, .update = update,
                      .guard = guard});
  orthogonalise(r.param, update);
  be().muon_apply({.n = r.len, .step = static_cast<const MuonStepValues*>(muon_values_.raw()),
                   .scale = muon_[size_t(r.param)].scale, .update = update, .value = value_of(r), .guard = guard});
}

void Optimizer::muon_pieces_step(const double* guard) {
  const int me = g_.dp->rank();
  float* stage = (zero_ == 3 ? received_ : gather_stage_).f32();
  std::vector<float*> full(params_.infos.size(), nullptr);
  const IdPointer whole = [&](int id) { return full[size_t(id)]; };
  const IdPointer piece = [&](int id) { return shard_grad_.f32() + pieces_[size_t(id)].at; };
  for (size_t i = 0; i < muon_pieces_.size();) {
    // Consecutive matrices whose pieces fit the packed buffer, each gathered whole.
    std::vector<int> ids;
    size_t section = 0, at = 0;
    for (; i < muon_pieces_.size() && section + pieces_[size_t(muon_pieces_[i])].size <= batch_; ++i) {
      const int id = muon_pieces_[i];
      ids.push_back(id);
      section += pieces_[size_t(id)].size;
      full[size_t(id)] = zero_ == 1 ? params_.grads_data() + params_.infos[size_t(id)].grad_offset
                                    : muon_full_.f32() + at;
      at += params_.infos[size_t(id)].numel;
    }
    MT_CHECK(!ids.empty());
    all_gather_pieces(ids, piece, stage, whole, *muon_dp_);
    for (int id : ids) {
      if (muon_owner_[size_t(id)] == me) orthogonalise(id, full[size_t(id)]);
      else be().zero(full[size_t(id)], params_.infos[size_t(id)].numel * sizeof(float));
    }
    // Each rank's piece: the owner's, plus zeros from the others.
    pack_pieces(ids, whole, packed_.f32());
    muon_dp_->reduce_scatter_sum(device_span(packed_.f32(), section * size_t(g_.dp->size())),
                                 device_span(stage, section));
    muon_calls_ += 2;
    size_t off = 0;
    for (int id : ids) {
      be().copy(piece(id), stage + off, pieces_[size_t(id)].size * sizeof(float));
      off += pieces_[size_t(id)].size;
    }
  }
  const auto* values = static_cast<const MuonStepValues*>(muon_values_.raw());
  for (const Run& r : runs_)
    if (r.sharded && muon_[size_t(r.param)].muon)
      be().muon_apply({.n = r.len, .step = values, .scale = muon_[size_t(r.param)].scale,
                       .update = shard_grad_.f32() + r.grad_offset, .value = value_of(r), .guard = guard});
}

void Optimizer::time_muon_communication() {
  const bool cut = !muon_pieces_.empty() || std::any_of(runs_.begin(), runs_.end(), [&](const Run& r) {
    return muon_[size_t(r.param)].muon && tp_sliced(r.param);
  });
  if (!cut) return;
  muon_timer_ = std::make_unique<DeviceTimer>(be());
  timed_dp_ = make_timed_device_comm(*g_.dev.dp, &muon_host_seconds_, muon_timer_.get());
  timed_tp_ = make_timed_device_comm(*g_.dev.tp, &muon_host_seconds_, muon_timer_.get());
  muon_dp_ = timed_dp_.get(), muon_tp_ = timed_tp_.get();
}

std::optional<OpKindTime> Optimizer::take_muon_communication() {
  if (!muon_timer_) return std::nullopt;
  OpKindTime t{.name = "muon_gather_scatter", .calls = muon_calls_,
               .seconds = muon_timer_->take_seconds() + muon_host_seconds_};
  muon_calls_ = 0, muon_host_seconds_ = 0;
  return t;
}

}  // namespace mt
