#pragma once
// Whether a trainer is still writing a run: <run>/lock exists, or log.h5 is marked open for
// writing. A trainer that was killed (SIGKILL, a crash) leaves the mark behind too.
#include <string>

namespace mt {

// Empty when nothing writes the run; otherwise what shows that something does.
std::string run_writer(const std::string& run_dir);

}  // namespace mt
