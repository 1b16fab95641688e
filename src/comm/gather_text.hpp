#pragma once
// Short texts and byte strings over a host Comm, which carries only numbers: every rank's string
// to every rank (the start banner's device per rank, NCCL's unique id from the group's first rank).
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace mt {

// Every rank's `mine`, in rank order, on every rank. A collective: every rank of `comm` calls it.
std::vector<std::string> all_gather_text(Comm& comm, const std::string& mine);

}  // namespace mt
