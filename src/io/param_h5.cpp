#include "io/param_h5.hpp"

#include <algorithm>

#include "io/h5util.hpp"

namespace mt {

void write_param_set(hid_t f, const std::string& group, const ParamStore& p, const std::vector<float>& data) {
  for (auto& info : p.infos) {
    std::vector<hsize_t> dims(info.shape.begin(), info.shape.end());
    h5::write_floats(f, group + "/" + info.name, data.data() + info.offset, dims);
  }
}

void read_param_set(hid_t f, const std::string& group, const ParamStore& p, std::vector<float>& data) {
  for (auto& info : p.infos) {
    std::vector<float> v = h5::read_floats(f, group + "/" + info.name, info.numel);
    std::copy(v.begin(), v.end(), data.begin() + info.offset);
  }
}

void write_buffers(hid_t f, const std::string& group, const ParamStore& p) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    h5::write_floats(f, group + "/" + p.buffer_names[i], p.buffers[i].data(), {p.buffers[i].size()});
}

void read_buffers(hid_t f, const std::string& group, ParamStore& p) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    p.buffers[i] = h5::read_floats(f, group + "/" + p.buffer_names[i], p.buffers[i].size());
}

}  // namespace mt
