// `moetrain dump-step`: an experiment's first optimizer step, its inputs, logits, gradients and updated
// state, written to HDF5 (what tests compare with a reference implementation).
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "config/config.hpp"
#include "train/dump_step.hpp"
#include "util/cli_checks.hpp"

namespace mt::cli {

namespace {

struct DumpArgs {
  std::string experiment, out;
  std::vector<std::string> sets;
  bool start_only = false;
  std::string from;
};

}  // namespace

Command add_dump_step(CLI::App& app) {
  auto a = std::make_shared<DumpArgs>();
  CLI::App* dump = app.add_subcommand("dump-step",
      "Run an experiment's first optimizer step and write its inputs, logits, gradients and updated state to HDF5");
  dump->add_option("experiment", a->experiment, "experiment file")->required();
  dump->add_option("--out", a->out, "output HDF5 file")->required();
  add_set_option(dump, a->sets);
  dump->add_flag("--start-only", a->start_only, "write only the config, the initial state and the batch");
  dump->add_option("--from", a->from,
                   "a checkpoint directory of the same model: its parameters instead of the initial ones, and its "
                   "optimizer state, which the step continues (written as /before/exp_avg, exp_avg_sq)")
      ->check(mt::not_empty("a checkpoint directory"));
  return {dump, [a] {
            mt::dump_step(mt::load_config(a->experiment, a->sets), a->out, a->start_only, a->from);
            std::printf("dump-step: wrote %s\n", a->out.c_str());
            return 0;
          }};
}

}  // namespace mt::cli
