#pragma once
// Parameters stored by global name and index range, so that a checkpoint written under one
// layout loads under another. Each dataset "<group>/<name>" holds one rank's slice and carries
// its place in the whole parameter: attributes global_shape, split_dim (-1: whole) and
// split_start. A reader assembles any rank's slices from the slices of all files.
#include <hdf5.h>

#include <string>
#include <vector>

#include "io/h5util.hpp"
#include "model/params.hpp"

namespace mt {

// Writes the slices of the parameters `ids` from `data` (ParamStore layout).
void write_param_slices(hid_t file, const std::string& group, const ParamStore& p, const std::vector<float>& data,
                        const std::vector<int>& ids);

class ParamSlices {
 public:
  explicit ParamSlices(const std::vector<std::string>& paths);
  // Fills `data` (ParamStore layout) with each parameter's slice, wherever the pieces are.
  // Throws UserError naming the parameter when a shape differs or a piece is missing.
  void read(const std::string& group, const ParamStore& p, std::vector<float>& data) const;
  void read_buffers(const std::string& group, const ParamStore& p) const;

 private:
  // Reads the part of `info` that file `fi` holds under `path`; returns the values filled.
  size_t read_piece(size_t fi, const std::string& path, const ParamInfo& info, std::vector<float>& data) const;
  std::vector<std::string> paths_;
  std::vector<h5::Handle> files_;
};

}  // namespace mt
