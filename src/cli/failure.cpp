#include "cli/failure.hpp"

#include <cstdio>
#include <string>

#include "comm/mpi_comm.hpp"

namespace mt::cli {

int command_line_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help
  const std::vector<CLI::App*> used = app.get_subcommands();
  if (used.empty()) {
    const bool named = argc > 1 && argv[1][0] != '-';
    std::fprintf(stderr, "%s", app.help().c_str());
    std::fprintf(stderr, "error: %s: give one of the commands above, e.g. `moetrain train EXPERIMENT`\n",
                 named ? ("'" + std::string(argv[1]) + "' is not a moetrain command").c_str() : "no command given");
    return 2;
  }
  const std::string command = used.front()->get_name();
  std::fprintf(stderr, "error: %s: %s\n`moetrain %s --help` lists its options\n", command.c_str(), e.what(),
               command.c_str());
  return 2;
}

int command_error(const std::exception& e, Comm* world) {
  if (world && world->size() > 1) {
    std::fprintf(stderr, "error on rank %d of %d: %s\n", world->rank(), world->size(), e.what());
    std::fflush(stderr);
    mt::MpiSession::abort_job(2);
  }
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}

}  // namespace mt::cli
