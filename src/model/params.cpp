#include "model/params.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/param_init.hpp"

namespace mt {

size_t ParamInfo::global_index(size_t i) const {
  if (split_dim < 0) return i;
  size_t inner = 1;
  for (size_t d = split_dim + 1; d < shape.size(); ++d) inner *= size_t(shape[d]);
  const size_t local = size_t(shape[split_dim]), whole = size_t(global_shape[split_dim]);
  const size_t outer = i / (inner * local), along = i / inner % local, within = i % inner;
  return (outer * whole + along + size_t(split_start)) * inner + within;
}

size_t ParamInfo::contiguous_run() const {
  if (split_dim < 0) return numel;
  size_t run = 1;
  for (size_t d = split_dim; d < shape.size(); ++d) run *= size_t(shape[d]);
  return run;
}

int ParamStore::add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay, Spread spread,
                    Split split) {
  ParamInfo p;
  p.name = name;
  p.global_shape = shape;
  p.spread = spread;
  if (split.parts > 1) {
    const int64_t piece = shape[split.dim] / split.parts;
    // The layout validator refuses splits that do not divide; reaching this is a bug.
    if (piece * split.parts != shape[split.dim])
      throw std::logic_error(name + ": dimension " + std::to_string(split.dim) + " of size " +
                             std::to_string(shape[split.dim]) + " does not split " + std::to_string(split.parts) +
                             " ways");
    shape[split.dim] = piece;
    p.split_dim = split.dim;
    p.split_start = piece * split.index;
  }
  p.shape = std::move(shape);
  p.numel = 1;
  for (auto d : p.shape) p.numel *= size_t(d);
  p.offset = p.grad_offset = p.value_offset = total_;
  p.decay = decay;
  total_ += p.numel;
  infos.push_back(std::move(p));
  inits_.push_back(init);
  return int(infos.size()) - 1;
}

int ParamStore::add_buffer(const std::string& name, size_t numel) {
  buffer_names.push_back(name);
  buffer_sizes_.push_back(numel);
  return int(buffer_sizes_.size()) - 1;
}

void ParamStore::finalize(const Backend& backend, uint64_t seed, double init_std, int threads) {
  // A piece at a time: the threads draw piece k into host memory while the calling thread uploads
  // piece k - 1 and zeroes piece k of the gradients, so that the buffers' memory is first touched
  // beside the drawing rather than before it, and no second whole copy of the values is held.
  values_ = Buffer(backend, DType::f32, total_, Unfilled{});
  grads_ = Buffer(backend, DType::f32, total_, Unfilled{});
  constexpr size_t piece = size_t(1) << 24;
  const size_t pieces = (total_ + piece - 1) / piece;
  auto length = [&](size_t k) { return std::min(piece, total_ - k * piece); };
  std::vector<float> staged[2];
  for (auto& s : staged) s.resize(std::min(piece, total_));
  for (size_t k = 0; k < pieces; ++k)
    draw_initial_values(infos, inits_, seed, init_std, k * piece, k * piece + length(k), staged[k % 2].data(), threads,
                        [&] {
                          if (k) values_.upload(staged[(k - 1) % 2].data(), length(k - 1), (k - 1) * piece);
                          backend.zero(grads_.f32() + k * piece, length(k) * sizeof(float));
                        });
  if (pieces) values_.upload(staged[(pieces - 1) % 2].data(), length(pieces - 1), (pieces - 1) * piece);
  lent_.assign(infos.size(), nullptr);
  lent_values_.assign(infos.size(), nullptr);
  buffers_.clear();
  for (size_t n : buffer_sizes_) buffers_.emplace_back(backend, DType::f32, n);
  values_updated();
}

void ParamStore::release_gradients(const std::vector<int>& ids) {
  for (int id : ids) infos[size_t(id)].grad_released = true;
  size_t kept = 0;
  for (ParamInfo& p : infos)
    if (!p.grad_released) p.grad_offset = kept, kept += p.numel;
  grads_ = Buffer(values_.backend(), DType::f32, kept);
}

void ParamStore::release_values(const std::vector<int>& ids) {
  for (int id : ids) infos[size_t(id)].value_released = true;
  size_t kept = 0;
  for (const ParamInfo& p : infos) kept += p.value_released ? 0 : p.numel;
  Buffer values(values_.backend(), DType::f32, kept);
  kept = 0;
  for (ParamInfo& p : infos)
    if (!p.value_released) {
      backend().copy(values.f32() + kept, values_.f32() + p.value_offset, p.numel * sizeof(float));
      p.value_offset = kept, kept += p.numel;
    }
  values_ = std::move(values);
}

std::unordered_map<std::string, int> ParamStore::ids_by_name() const {
  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < infos.size(); ++i) ids[infos[i].name] = int(i);
  return ids;
}

std::unordered_map<std::string, int> ParamStore::buffer_ids_by_name() const {
  std::unordered_map<std::string, int> ids;
  for (size_t i = 0; i < buffer_names.size(); ++i) ids[buffer_names[i]] = int(i);
  return ids;
}

}  // namespace mt
