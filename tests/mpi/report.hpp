#pragma once
// The verdict line of an MPI test case: it passes only if it passed on every rank, and rank 0
// prints PASS or FAIL.
#include <cstdio>
#include <string>
#include <vector>

#include "comm/comm.hpp"

inline void report(mt::Comm& c, const std::string& name, bool ok) {
  std::vector<double> bad{ok ? 0.0 : 1.0};
  c.all_reduce_sum(bad);
  if (c.rank() == 0) std::printf("%s %s\n", bad[0] == 0 ? "PASS" : "FAIL", name.c_str());
}
