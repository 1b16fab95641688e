#pragma once
// A moetrain command: the CLI11 subcommand its add_* function set up on the app, and its body, which
// reads the options that parsing filled in and returns the exit status. Every command has a file of
// its own in src/cli/; main.cpp registers them in the order `moetrain --help` lists them.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace mt::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// The repeatable `--set section.key=value` of the commands that read an experiment (train, dump-step).
inline void add_set_option(CLI::App* cmd, std::vector<std::string>& sets) {
  cmd->add_option("--set", sets, "override a key: --set section.key=value (repeatable)")->allow_extra_args(false);
}

// world: the ranks mpirun started (null without mpirun); only the commands that care take it.
Command add_train(CLI::App& app, Comm* world);
Command add_prepare(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_dump_step(CLI::App& app);
Command add_sweep(CLI::App& app, Comm* world);
Command add_keys(CLI::App& app);
Command add_schedule(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_plan_check(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_sample(CLI::App& app, Comm* world);
Command add_export(CLI::App& app);
Command add_import(CLI::App& app);
Command add_plot(CLI::App& app);

}  // namespace mt::cli
