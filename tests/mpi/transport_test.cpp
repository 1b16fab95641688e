// choose_transport under mpirun: every rank makes the same choice, and "auto" stages, saying why, when
// one rank cannot load NCCL. run_mpi_tests.sh starts 3 ranks, the last with MOETRAIN_NCCL_LIBRARY
// naming a missing file. The devices are described, not opened: the choice only reads them.
#include <cstdio>
#include <string>
#include <vector>

#include "comm/gather_text.hpp"
#include "comm/mpi_comm.hpp"
#include "comm/nccl_comm.hpp"
#include "mpi/report.hpp"
#include "runtime/transport.hpp"
#include "util/error.hpp"

using namespace mt;

namespace {

Config with_comm(const std::string& comm) { return parse_config("", "exp.toml", {"parallel.comm=\"" + comm + "\""}); }

DeviceChoice device(DeviceChoice::Owned owned) {
  DeviceChoice d;
  d.owned = owned;
  d.description = owned == DeviceChoice::Owned::cuda ? "cuda:0 (described)" : "cpu";
  return d;
}

// The choice as one text, so that ranks can compare theirs.
std::string text(const TransportChoice& t) {
  return (t.transport == DeviceTransport::nccl ? "nccl" : "staged") + std::string(" ") + t.no_nccl;
}

bool same_everywhere(Comm& c, const std::string& mine) {
  for (const std::string& s : all_gather_text(c, mine))
    if (s != mine) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  auto world = session.world();
  Comm& c = *world;
  const DeviceChoice gpu = device(DeviceChoice::Owned::cuda), cpu = device(DeviceChoice::Owned::none);

  // The last rank cannot load NCCL: every rank stages, and says why.
  const std::string got = text(choose_transport(with_comm("auto"), gpu, c));
  report(c, "auto on GPU ranks, one without NCCL: every rank stages, saying why",
         got.rfind("staged no NCCL on rank ", 0) == 0 && same_everywhere(c, got));
  // In a CUDA build the first rank loads NCCL (a CPU-only build loads none, on any rank).
  std::string why;
  const bool loads = nccl_available(&why);
  const bool built_with_nccl = all_gather_text(c, loads ? "1" : "")[0] == "1";
  const std::string last = "staged no NCCL on rank " + std::to_string(c.size() - 1) +
                           ": MOETRAIN_NCCL_LIBRARY: /nonexistent/libnccl.so.2 could not be loaded";
  report(c, "auto: the rank without NCCL and why are named", !built_with_nccl || got.rfind(last, 0) == 0);
  // The ranks that load it take NCCL among themselves.
  std::unique_ptr<Comm> pair = c.split(c.rank() < 2 ? 0 : 1, c.rank());
  const std::string pair_got = text(choose_transport(with_comm("auto"), gpu, *pair));
  const std::string pair_want = c.rank() >= 2 ? "staged " : built_with_nccl ? "nccl " : "staged no NCCL on rank 0: " + why;
  report(c, "auto: ranks that all load NCCL take it; a lone rank stages", pair_got == pair_want);
  report(c, "auto on CPU ranks stages and asks nothing of NCCL",
         text(choose_transport(with_comm("auto"), cpu, c)) == "staged ");
  report(c, "staged is staged", text(choose_transport(with_comm("staged"), gpu, c)) == "staged ");
  bool refused = false;
  try {
    choose_transport(with_comm("nccl"), cpu, c);
  } catch (const UserError& e) {
    refused = std::string(e.what()).find("parallel.comm = \"nccl\" needs each rank on a GPU") != std::string::npos;
  }
  report(c, "nccl on a CPU rank: a user error", refused);
  return 0;
}
