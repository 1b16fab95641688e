#include "train/device.hpp"

#include "ops/cuda_backend.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}
}  // namespace

DeviceChoice choose_device(const Config& cfg) {
  const DeviceKind want = cfg.precision.device;
  DeviceChoice d;
  if (want == DeviceKind::cpu) {
    d.backend = cpu_backend();
    d.description = "cpu";
    return d;
  }
  if (want == DeviceKind::cpu_strict) {
    d.backend = cpu_strict_backend_create();
    d.owned = DeviceChoice::Owned::strict;
    d.description = "cpu-strict (device memory unreadable outside op calls)";
    return d;
  }
  std::string why;
  bool usable = cuda_available(&why);
  if (usable) {
    Backend probe = cuda_backend_create(0);
    std::vector<std::string> missing = missing_ops(*probe.ops);
    if (missing.empty()) {
      d.backend = probe;
      d.owned = DeviceChoice::Owned::cuda;
      d.description = "cuda:0";
      return d;
    }
    cuda_backend_destroy(probe);
    usable = false;
    why = "the CUDA op table does not yet implement " + join(missing);
  }
  if (want == DeviceKind::cuda)
    throw UserError(cfg.origin.at("precision.device") + ": precision.device = \"cuda\" cannot be used: " + why +
                    "; set precision.device = \"cpu\" or \"auto\"");
  d.backend = cpu_backend();
  d.description = "cpu (auto: " + why + ")";
  return d;
}

void release_device(DeviceChoice& d) {
  if (d.owned == DeviceChoice::Owned::cuda) cuda_backend_destroy(d.backend);
  if (d.owned == DeviceChoice::Owned::strict) cpu_strict_backend_destroy(d.backend);
  d.owned = DeviceChoice::Owned::none;
}

}  // namespace mt
