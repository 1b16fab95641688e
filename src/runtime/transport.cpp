#include "runtime/transport.hpp"

#include <vector>

#include "comm/gather_text.hpp"
#include "comm/nccl_comm.hpp"
#include "util/error.hpp"

namespace mt {

void require_nccl_if_asked(const Config& cfg) {
  std::string why;
  if (cfg.parallel.comm == CommChoice::nccl && !nccl_available(&why))
    throw UserError(cfg.origin.at("parallel.comm") + ": parallel.comm = \"nccl\", but NCCL cannot be loaded: " + why +
                    "; or set parallel.comm = \"staged\" (device payloads through host memory and MPI)");
}

TransportChoice choose_transport(const Config& cfg, const DeviceChoice& device, Comm& world) {
  const auto& p = cfg.parallel;
  const bool gpu = device.owned == DeviceChoice::Owned::cuda;
  if (p.comm == CommChoice::nccl) {
    if (!gpu)
      throw UserError(cfg.origin.at("parallel.comm") + ": parallel.comm = \"nccl\" needs each rank on a GPU, but this "
                      "one runs on " + device.description +
                      "; set precision.device = \"cuda\", or parallel.comm = \"auto\"");
    return {DeviceTransport::nccl, ""};
  }
  // A lone rank has nothing to send, and NCCL refuses ranks sharing a GPU: they stage.
  if (p.comm == CommChoice::staged || p.share_gpu || world.size() < 2) return {};
  // Every rank takes NCCL or none does; a rank without a GPU stages and asks nothing of NCCL.
  std::string why;
  const bool loads = !gpu || nccl_available(&why);
  const std::vector<std::string> reasons = all_gather_text(world, loads ? "" : why);
  for (size_t r = 0; r < reasons.size(); ++r)
    if (!reasons[r].empty())
      return {DeviceTransport::staged, "no NCCL on rank " + std::to_string(r) + ": " + reasons[r]};
  return {gpu ? DeviceTransport::nccl : DeviceTransport::staged, ""};
}

}  // namespace mt
