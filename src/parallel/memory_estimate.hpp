#pragma once
// The host memory a CPU training run reaches at its peak, as named terms (docs/memory.md), so that
// a run that cannot fit is refused before it starts instead of being killed by the kernel.
#include <string>
#include <vector>

#include "config/config.hpp"
#include "parallel/storage_model.hpp"

namespace mt {

struct MemoryTerm {
  std::string name;   // what it holds, e.g. "AdamW moments"
  double bytes = 0;
  bool transient = false;  // one of the phases that never overlap: only the largest of them counts
};

struct HostMemoryEstimate {
  std::vector<MemoryTerm> terms;
  int ranks_here = 1;  // ranks that share this host, each holding its own copy of every term
  // The terms that last the whole run plus the largest transient one, times ranks_here.
  double peak_bytes() const;
  // The peak with the margin for what the terms do not see (kMemoryMargin).
  double needed_bytes() const;
  // One line per term, then the peak, the margin and the sum.
  std::string table() const;
};

// The share of the peak added for what the estimate cannot see: OpenBLAS's per-thread buffers,
// the allocator's free lists and page rounding, HDF5's caches, MPI's buffers.
inline constexpr double kMemoryMargin = 0.10;

// This run's storage per rank (parallel/storage_model.hpp, the planner's too): weights, gradients,
// AdamW moments, and the arenas of one slot (of every micro-batch in flight under a pipeline schedule).
RankMemory run_storage(const Config& cfg);

// `program_bytes`: what the process holds before training allocates anything (binary, shared
// libraries, MPI), measured at the check; `shard_bytes`: the token shards, mapped and read whole.
HostMemoryEstimate estimate_host_memory(const Config& cfg, int slots, double program_bytes, double shard_bytes);

// Resident memory of this process now (VmRSS), and the most it has held (VmHWM), in bytes; 0 when not known.
double resident_bytes_now();
double resident_high_water_bytes();
// The summed size of the files `pattern` (a path or glob) matches.
double files_bytes(const std::string& pattern);
// MemAvailable of /proc/meminfo, or MOETRAIN_MEMORY_AVAILABLE (bytes) when set; 0 when not known.
double available_host_bytes();

// Throws a UserError with the table and what to change when the run's estimate does not fit;
// else returns the estimated peak of this rank (without the margin).
double check_host_memory(const Config& cfg, int slots);

}  // namespace mt
