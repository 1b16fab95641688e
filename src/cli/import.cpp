// `moetrain import`: a Hugging Face model as a run directory that trains it further.
#include <memory>

#include "cli/command.hpp"
#include "interop/hf.hpp"

namespace mt::cli {

namespace {

struct ImportArgs {
  std::string dir, out, data;
  long long seed = 1234;
};

}  // namespace

Command add_import(CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  CLI::App* import_cmd = app.add_subcommand(
      "import", "Turn a Hugging Face model into a run directory: its checkpoint and an experiment that trains it");
  import_cmd->add_option("hf", a->dir, "directory with config.json and model.safetensors")->required();
  import_cmd->add_option("--out", a->out, "new run directory: experiment.toml and ckpt/step_00000000")
      ->required();
  import_cmd->add_option("--data", a->data,
                         "directory of shards (train_*.bin, val_*.bin) written with the model's tokenizer, "
                         "e.g. data/fortunes")
      ->required();
  import_cmd->add_option("--seed", a->seed,
                         "the run.seed the checkpoint records (default 1234, run.seed's default)");
  return {import_cmd, [a] {
            mt::import_hf(a->dir, a->out, a->data, a->seed);
            return 0;
          }};
}

}  // namespace mt::cli
