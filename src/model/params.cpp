#include "model/params.hpp"

#include "util/error.hpp"
#include "util/init_rng.hpp"

namespace mt {

int ParamStore::add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay) {
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.numel = 1;
  for (auto d : p.shape) p.numel *= size_t(d);
  p.offset = total_;
  p.decay = decay;
  total_ += p.numel;
  infos.push_back(std::move(p));
  inits_.push_back(init);
  return int(infos.size()) - 1;
}

int ParamStore::add_buffer(const std::string& name, size_t numel) {
  buffer_names.push_back(name);
  buffers.emplace_back(numel, 0.0f);
  return int(buffers.size()) - 1;
}

void ParamStore::finalize(uint64_t seed, double init_std) {
  values.assign(total_, 0.0f);
  grads.assign(total_, 0.0f);
  adam_m.assign(total_, 0.0f);
  adam_v.assign(total_, 0.0f);
  for (size_t i = 0; i < infos.size(); ++i) {
    float* v = values.data() + infos[i].offset;
    const uint64_t key = param_key(seed, infos[i].name);
    for (size_t j = 0; j < infos[i].numel; ++j) {
      switch (inits_[i]) {
        case Init::normal: v[j] = float(init_std * counter_normal(key, j)); break;
        case Init::ones: v[j] = 1.0f; break;
        case Init::zeros: v[j] = 0.0f; break;
      }
    }
  }
}

}  // namespace mt
