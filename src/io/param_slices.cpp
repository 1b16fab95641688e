#include "io/param_slices.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace mt {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The extent along `dim` of a stored slice.
int64_t extent_along(hid_t dataset, int dim) {
  h5::Handle space(H5Dget_space(dataset), H5Sclose);
  const std::vector<hsize_t> dims = h5::extent(space, "reading a slice's shape");
  if (size_t(dim) >= dims.size())
    throw UserError("HDF5: a slice has " + std::to_string(dims.size()) + " dimensions, no dimension " +
                    std::to_string(dim));
  return int64_t(dims[size_t(dim)]);
}

}  // namespace

void write_param_slices(hid_t f, const std::string& group, const ParamStore& p, const std::vector<float>& data,
                        const std::vector<int>& ids) {
  for (int id : ids) {
    const ParamInfo& info = p.infos[id];
    const std::string path = group + "/" + info.name;
    h5::write_floats(f, path, data.data() + info.offset, std::vector<hsize_t>(info.shape.begin(), info.shape.end()));
    h5::Handle d(h5::check(H5Dopen2(f, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
    h5::write_ints_attr(d, "global_shape", std::vector<long long>(info.global_shape.begin(), info.global_shape.end()));
    h5::write_int_attr(d, "split_dim", info.split_dim);
    h5::write_int_attr(d, "split_start", info.split_start);
  }
}

ParamSlices::ParamSlices(const std::vector<std::string>& paths) : paths_(paths) {
  for (auto& path : paths) files_.push_back(h5::open_file(path, false));
}

size_t ParamSlices::read_piece(size_t fi, const std::string& path, const ParamInfo& info,
                               std::vector<float>& data) const {
  hid_t f = files_[fi];
  h5::Handle d(h5::check(H5Dopen2(f, path.c_str(), H5P_DEFAULT), "opening " + path), H5Dclose);
  const std::vector<long long> g = h5::read_ints_attr(d, "global_shape");
  if (!std::equal(g.begin(), g.end(), info.global_shape.begin(), info.global_shape.end()))
    throw UserError(paths_[fi] + ": " + path + " has shape " + shape_text({g.begin(), g.end()}) +
                    ", this model's is " + shape_text(info.global_shape));
  const int piece_dim = int(h5::read_int_attr(d, "split_dim"));
  const int64_t piece_start = h5::read_int_attr(d, "split_start");
  if (piece_dim >= int(g.size()))
    throw UserError(paths_[fi] + ": " + path + " says it is split along dimension " + std::to_string(piece_dim) +
                    " of " + std::to_string(g.size()));
  const int dim = piece_dim >= 0 ? piece_dim : info.split_dim;
  if (piece_dim >= 0 && info.split_dim >= 0 && piece_dim != info.split_dim)
    throw UserError(paths_[fi] + ": " + path + " is split along dimension " + std::to_string(piece_dim) +
                    ", this moetrain splits it along " + std::to_string(info.split_dim));
  if (dim < 0) {  // whole on both sides
    const std::vector<float> piece = h5::read_floats(f, path, info.numel);
    std::copy(piece.begin(), piece.end(), data.begin() + info.offset);
    return info.numel;
  }
  size_t outer = 1, inner = 1;
  for (int k = 0; k < dim; ++k) outer *= size_t(g[k]);
  for (size_t k = dim + 1; k < g.size(); ++k) inner *= size_t(g[k]);
  const int64_t piece_len = piece_dim >= 0 ? extent_along(d, dim) : g[dim];
  if (piece_dim >= 0 && (piece_start < 0 || piece_start + piece_len > g[dim]))
    throw UserError(paths_[fi] + ": " + path + " says its " + std::to_string(piece_len) + " rows along dimension " +
                    std::to_string(dim) + " start at split_start " + std::to_string(piece_start) + ", outside [0, " +
                    std::to_string(g[dim]) + ")");
  const int64_t my_len = info.shape[dim], my_start = info.split_dim >= 0 ? info.split_start : 0;
  const int64_t lo = std::max(piece_start, my_start), hi = std::min(piece_start + piece_len, my_start + my_len);
  if (lo >= hi) return 0;
  // Only the overlap is read: a rank reads its share of the checkpoint, not all of it.
  const std::vector<float> part = h5::read_floats_along(f, path, dim, hsize_t(lo - piece_start), hsize_t(hi - lo));
  const size_t block = size_t(hi - lo) * inner;
  for (size_t o = 0; o < outer; ++o)
    std::copy_n(part.begin() + o * block, block, data.begin() + info.offset + (o * my_len + (lo - my_start)) * inner);
  return outer * block;
}

void ParamSlices::read(const std::string& group, const ParamStore& p, std::vector<float>& data) const {
  for (const ParamInfo& info : p.infos) {
    const std::string path = group + "/" + info.name;
    size_t filled = 0;
    for (size_t fi = 0; fi < files_.size(); ++fi) {
      try {
        if (h5::exists(files_[fi], path)) filled += read_piece(fi, path, info, data);
      } catch (const h5::Failure& e) {
        throw h5::Failure(paths_[fi] + ": " + e.what());
      }
    }
    if (filled != info.numel)
      throw UserError(path + ": the checkpoint holds " + std::to_string(filled) + " of the " +
                      std::to_string(info.numel) +
                      " values this rank needs (files missing from the checkpoint directory?)");
  }
}

void ParamSlices::read_buffers(const std::string& group, const ParamStore& p) const {
  for (size_t i = 0; i < p.buffer_names.size(); ++i) {
    const std::string path = group + "/" + p.buffer_names[i];
    bool found = false;
    for (size_t fi = 0; fi < files_.size() && !found; ++fi) {
      try {
        found = h5::exists(files_[fi], path);
        if (found) p.set_buffer(int(i), h5::read_floats(files_[fi], path, p.buffer_size(int(i))));
      } catch (const h5::Failure& e) {
        throw h5::Failure(paths_[fi] + ": " + e.what());
      }
    }
    if (!found) throw UserError("HDF5: dataset " + path + " is missing");
  }
}

}  // namespace mt
