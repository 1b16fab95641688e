// `moetrain sample`: a prompt continued by a trained run's newest checkpoint.
#include <memory>

#include "cli/command.hpp"
#include "infer/sample.hpp"
#include "util/cli_checks.hpp"
#include "util/error.hpp"

namespace mt::cli {

Command add_sample(CLI::App& app, Comm* world) {
  auto o = std::make_shared<mt::SampleOptions>();
  CLI::App* sample = app.add_subcommand("sample",
      "Continue a prompt with a trained run's newest checkpoint, one token at a time (key/value cache)");
  sample->add_option("run", o->run_dir, "run directory holding ckpt/, e.g. runs/tiny")->required();
  sample->add_option("--prompt", o->prompt, "text to continue (default: none, a new document)");
  sample->add_option("--tokens", o->tokens,
                     "new tokens at most (default 200; the model's seq_len bounds prompt + sample)")
      ->check(mt::whole_in(1, 1 << 20));
  sample->add_option("--temperature", o->temperature, "0 picks the likeliest token; above 1 flattens (default 0.8)")
      ->check(mt::finite_at_least(0));
  sample->add_option("--top-k", o->top_k,
                     "draw among the k likeliest tokens, 0 = all (default 40; at most model.vocab_size)")
      ->check(mt::whole_in(0, 1 << 24));
  sample->add_option("--seed", o->seed, "random seed of the draws (default 0)")->check(mt::unsigned_64());
  sample->add_option("--device", o->device,
                     "auto, cpu, cuda or cpu-strict (default: the run's precision.device)")
      ->check(mt::not_empty("auto, cpu, cuda or cpu-strict"));
  return {sample, [o, world] {
            if (world) throw mt::UserError("sample: start it without mpirun; it runs on one device");
            mt::sample_text(*o);
            return 0;
          }};
}

}  // namespace mt::cli
