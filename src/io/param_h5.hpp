#pragma once
// One HDF5 dataset per parameter, named "<group>/<parameter name>" with the parameter's shape,
// for any of the ParamStore's parallel buffers (values, gradients, moments). Checkpoints store
// slices instead (param_slices.hpp); whole sets are for dump-step files.
#include <hdf5.h>

#include <string>
#include <vector>

#include "model/params.hpp"

namespace mt {

void write_param_set(hid_t file, const std::string& group, const ParamStore& p, const std::vector<float>& data);
void write_buffers(hid_t file, const std::string& group, const ParamStore& p);

}  // namespace mt
