#include "interop/import_experiment.hpp"

#include <filesystem>
#include <map>
#include <vector>

#include "config/config.hpp"
#include "util/escape.hpp"
#include "io/bpe.hpp"
#include "io/json.hpp"
#include "io/shards.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace mt {

namespace fs = std::filesystem;

namespace {

// What decides a BPE tokenizer's ids: its vocabulary and its merges. Merges are written either as
// "a b" or as ["a", "b"] (newer `tokenizers`); both become "a b".
struct TokenizerIds {
  std::map<std::string, double> vocab;
  std::vector<std::string> merges;
  bool operator==(const TokenizerIds&) const = default;
};

TokenizerIds tokenizer_ids(const std::string& text, const std::string& where) {
  const Json doc = parse_json(text, where);
  const Json& model = doc.at("model", where);
  const Json& vocab = model.at("vocab", where + ": model");
  const Json& merges = model.at("merges", where + ": model");
  if (vocab.kind != Json::Kind::object || merges.kind != Json::Kind::array)
    throw UserError(where + ": model.vocab and model.merges: expected a BPE tokenizer's table and list");
  TokenizerIds ids;
  for (const auto& [token, id] : vocab.object) ids.vocab[token] = id.kind == Json::Kind::number ? id.number : -1;
  for (const Json& m : merges.array) {
    if (m.kind == Json::Kind::string) ids.merges.push_back(m.string);
    else if (m.kind == Json::Kind::array && m.array.size() == 2 && m.array[0].kind == Json::Kind::string &&
             m.array[1].kind == Json::Kind::string)
      ids.merges.push_back(m.array[0].string + " " + m.array[1].string);
    else
      throw UserError(where + ": model.merges: expected \"a b\" or [\"a\", \"b\"] for each merge");
  }
  return ids;
}

}  // namespace

ImportPlace import_place(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "runs/x/" -> "runs/x"
  if (p.filename() == "." || p.filename() == ".." || p.empty()) p = fs::absolute(p).lexically_normal();
  const std::string parent = p.parent_path().string();
  return {parent.empty() ? "." : parent, p.filename().string()};
}

std::string check_import_data(const std::string& hf_dir, const std::string& data_dir, int vocab_size) {
  const std::string train = (fs::path(data_dir) / "train_*.bin").string();
  const std::string val = (fs::path(data_dir) / "val_*.bin").string();
  // Opening the shards checks that they exist and that every id lies within the vocabulary.
  TokenStream(train, "--data " + data_dir + " (its training shards)", vocab_size);
  TokenStream(val, "--data " + data_dir + " (its validation shards)", vocab_size);
  const std::string bpe_path = tokenizer_beside(train);
  const bool bpe = fs::exists(bpe_path);
  const std::string shards_tokenizer = bpe ? bpe_path : "moetrain's byte tokenizer, as no tokenizer.bpe is there";
  const fs::path theirs = fs::path(hf_dir) / "tokenizer.json";
  if (!fs::exists(theirs))
    return hf_dir + " has no tokenizer.json; the shards of " + data_dir + " are read with " + shards_tokenizer;
  const Bpe ours = bpe ? Bpe::load(bpe_path) : Bpe::byte_level();
  if (!(tokenizer_ids(read_file(theirs.string()), theirs.string()) ==
        tokenizer_ids(ours.hf_json(), shards_tokenizer)))
    throw UserError(theirs.string() + ": not the tokenizer the shards of --data " + data_dir + " were written with (" +
                    shards_tokenizer + "): the vocabularies or merges differ, so the model would read other "
                    "tokens than it learned. Give --data the shards `moetrain prepare` wrote for this model (a model "
                    "exported by moetrain: the data of the run it came from)");
  return theirs.string() + " is the tokenizer of the shards of " + data_dir + ": " + shards_tokenizer;
}

std::string import_experiment_toml(const std::string& hf_dir, const std::string& run_dir, const std::string& data_dir,
                                   const std::string& model_table, long long seed) {
  const ImportPlace place = import_place(run_dir);
  const Config defaults;
  const std::string shards = (fs::path(data_dir) / "").string();
  std::string t;
  t += "# " + hf_dir + " imported by `moetrain import`; relative paths start where import ran.\n";
  t += "# Training starts from the imported weights: ckpt/step_00000000 of this run, which\n";
  t += "# checkpoint.resume = \"auto\" finds. Before its first step any key may change but run.seed and the\n";
  t += "# model's shapes.\n";
  t += "[run]\nname = " + json_string(place.name) + "\nout_dir = " + json_string(place.out_dir) +
       "\nseed = " + std::to_string(seed) + "   # the seed the checkpoint records\n\n";
  t += model_table + "\n";
  t += "[data]\ntrain = " + json_string(shards + "train_*.bin") + "\nval = " + json_string(shards + "val_*.bin") +
       "\n\n";
  t += "[training]\nsteps = " + std::to_string(defaults.training.steps) +
       "\nglobal_batch = " + std::to_string(defaults.training.global_batch) +
       "\nmicro_batch = " + std::to_string(defaults.training.micro_batch) +
       "\neval_every = " + std::to_string(defaults.training.eval_every) + "\n\n";
  t += "[optimizer]\nlr = 0.0003   # a tenth of moetrain's default: the weights are trained already\n\n";
  t += "[lr_schedule]\nkind = \"cosine\"\nwarmup_steps = " + std::to_string(defaults.lr_schedule.warmup_steps) +
       "\n\n";
  t += "[checkpoint]\nevery = " + std::to_string(defaults.checkpoint.every) + "\nresume = \"auto\"\n";
  return t;
}

}  // namespace mt
