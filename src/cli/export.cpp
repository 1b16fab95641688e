// `moetrain export`: a run's newest checkpoint as a Hugging Face model.
#include <memory>

#include "cli/command.hpp"
#include "interop/hf.hpp"

namespace mt::cli {

namespace {

struct ExportArgs {
  std::string run, out;
};

}  // namespace

Command add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Write a run's newest checkpoint as a Hugging Face model (transformers' DeepseekV3ForCausalLM)");
  export_cmd->add_option("run", a->run, "run directory holding ckpt/, e.g. runs/tiny")->required();
  export_cmd->add_option("--hf", a->out, "output directory: config.json, model.safetensors, tokenizer.json")
      ->required();
  return {export_cmd, [a] {
            mt::export_hf(a->run, a->out);
            return 0;
          }};
}

}  // namespace mt::cli
