// training.cuda_graph: what a captured pass may hold. A graph replays a fixed list of device work,
// so a pass may not make the host wait for the device, read from it or talk through it.
#include "config/validate.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
void refuse(const Config& c, const std::string& key, const std::string& why) {
  throw UserError(c.origin.at("training.cuda_graph") + ": training.cuda_graph = true " + why + " (" +
                  c.origin.at(key) + ")");
}
// Why a captured pass needs NCCL: `what` happens inside it, and the staged transport's host copies cannot.
std::string needs_nccl(const std::string& what, const std::string& alternative) {
  return what + ", which only NCCL's collectives allow (the staged MPI transport copies through the host): set "
         "parallel.comm = \"nccl\"" + alternative;
}
}  // namespace

void validate_cuda_graph(const Config& c) {
  if (!c.training.cuda_graph) return;
  const auto& p = c.parallel;
  const DeviceKind d = c.precision.device;
  const std::string ep = std::to_string(p.ep), tp = std::to_string(p.tp), pp = std::to_string(p.pp);
  const struct {
    bool refused;
    const char* key;
    std::string why;
  } rules[] = {
      {d == DeviceKind::cpu || d == DeviceKind::cpu_strict, "precision.device",
       "captures CUDA graphs and needs precision.device = \"cuda\" (or \"auto\" on a GPU); set it false on the CPU, "
       "where the ops run at the host's call"},
      {p.ep > 1, "parallel.ep",
       "cannot go with parallel.ep = " + ep + ": each MoE layer's all-to-all is sized by expert counts read on the "
       "host, which a graph cannot replay; use parallel.ep = 1 (experts replicated over the data-parallel ranks)"},
      {p.tp > 1 && p.comm != CommChoice::nccl, "parallel.comm",
       needs_nccl("with parallel.tp = " + tp + " captures the tensor-parallel sums inside the layers", "")},
      {p.dp > 1 && p.zero >= 2 && p.comm != CommChoice::nccl, "parallel.comm",
       needs_nccl("with parallel.dp = " + std::to_string(p.dp) + " and parallel.zero = " + std::to_string(p.zero) +
                      " captures the gradients' reduce-scatter (and ZeRO-3's weight gathers) inside the passes",
                  " or parallel.zero <= 1")},
      {p.pp > 1, "parallel.pp",
       "cannot go with parallel.pp = " + pp + ": a pipeline's passes hand activations over between them on the "
       "host's schedule, and DualPipe runs two passes at once on two threads; capture is built for parallel.pp = 1"},
  };
  for (const auto& r : rules)
    if (r.refused) refuse(c, r.key, r.why);
}

}  // namespace mt
