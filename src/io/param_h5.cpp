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

void write_buffers(hid_t f, const std::string& group, const ParamStore& p) {
  for (size_t i = 0; i < p.buffer_names.size(); ++i) {
    const std::vector<float> values = p.host_buffer(int(i));
    h5::write_floats(f, group + "/" + p.buffer_names[i], values.data(), {values.size()});
  }
}


}  // namespace mt
