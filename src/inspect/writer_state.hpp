#pragma once
// Whether a trainer is still writing a run: it holds <run>/lock (io/run_lock.hpp) as long as it
// lives. log.h5 left marked open with no holder means its trainer was killed (SIGKILL, a crash).
#include <string>

namespace mt {

// Empty when nothing writes the run; otherwise who holds its lock.
std::string run_writer(const std::string& run_dir);
// Whether <run>/log.h5 is marked open by a writer (HDF5's superblock flags).
bool log_left_open(const std::string& run_dir);

}  // namespace mt
