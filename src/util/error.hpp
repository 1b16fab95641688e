#pragma once
// User-facing failures. Anything caused by user input (config, data files, command line)
// throws UserError with a message that names the file, the key or position, what is wrong and
// what would be right; main() prints it and exits with status 2. Internal invariants use
// MT_CHECK, which reports file:line and exits with status 3.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mt {

struct UserError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void internal_failure(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "moetrain internal error: %s failed at %s:%d (this is a bug in moetrain)\n",
               cond, file, line);
  std::exit(3);
}

}  // namespace mt

#define MT_CHECK(cond) \
  do { if (!(cond)) ::mt::internal_failure(#cond, __FILE__, __LINE__); } while (0)
