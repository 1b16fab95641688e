#pragma once
// The experiment `moetrain import` writes beside the imported checkpoint: every section a run
// needs, its run directory the import's own (so checkpoint.resume = "auto" starts from the imported
// step 0), and data that fits the imported model's tokenizer.
#include <string>

namespace mt {

struct ImportPlace {
  std::string out_dir, name;  // run.out_dir and run.name of the import's directory
};

// run.out_dir and run.name of a run whose directory is `dir` (as typed: relative paths stay so).
ImportPlace import_place(const std::string& dir);

// Checks the shards `moetrain prepare` wrote in `data_dir` (train_*.bin, val_*.bin) fit the model
// of `hf_dir`: every id below `vocab_size` and, where hf_dir holds a tokenizer.json, that tokenizer
// the one the shards were written with (the same vocabulary and merges). Throws UserError naming
// what differs. Returns a line for the import's report on which tokenizer that is.
std::string check_import_data(const std::string& hf_dir, const std::string& data_dir, int vocab_size);

// The experiment's text: `model_table` ([model] and its subtables) with [run], [data] on
// data_dir's shards, a fine-tune's [training], [optimizer], [lr_schedule] and [checkpoint].
std::string import_experiment_toml(const std::string& hf_dir, const std::string& run_dir, const std::string& data_dir,
                                   const std::string& model_table, long long seed);

}  // namespace mt
