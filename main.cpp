// moetrain command line: create the app, register every command (src/cli/, a file each), parse and
// run the one named. User errors print one message and exit 2.
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <vector>

#include "cli/command.hpp"
#include "cli/failure.hpp"
#include "comm/mpi_comm.hpp"
#include "io/h5util.hpp"

int main(int argc, char** argv) {
  mt::h5::no_cleanup_at_exit();
  // Under mpirun every rank joins the job before anything else; without it, no MPI at all.
  std::optional<mt::MpiSession> mpi;
  std::unique_ptr<mt::Comm> world;
  if (mt::started_by_mpirun()) {
    mpi.emplace(&argc, &argv);
    world = mpi->world();
  }
  CLI::App app{"moetrain: a trainer for DeepSeek-V3-style Mixture-of-Experts transformers"};
  app.require_subcommand(1);
  using namespace mt::cli;
  // In the order `moetrain --help` lists them.
  const std::vector<Command> commands = {
      add_train(app, world.get()), add_prepare(app),    add_tokenize(app), add_dump_step(app),
      add_sweep(app, world.get()), add_keys(app),       add_schedule(app), add_plan(app),
      add_plan_check(app),         add_inspect(app),    add_sample(app, world.get()),
      add_export(app),             add_import(app),     add_plot(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return command_line_error(app, e, argc, argv);
  }
  try {
    for (const Command& c : commands)
      if (*c.app) return c.run();
  } catch (const std::exception& e) {
    return command_error(e, world.get());
  }
  return 0;
}
