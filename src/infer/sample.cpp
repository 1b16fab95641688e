#include "infer/sample.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "config/config.hpp"
#include "infer/checkpoint_model.hpp"
#include "infer/decoder.hpp"
#include "io/bpe.hpp"
#include "model/model.hpp"
#include "runtime/device.hpp"

namespace mt {

namespace fs = std::filesystem;

namespace {

// The next token from the logits: the top_k likeliest, their probabilities sharpened or flattened
// by the temperature, one drawn; the likeliest at temperature 0.
int draw(const std::vector<float>& logits, double temperature, int top_k, std::mt19937_64& rng) {
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t keep = top_k > 0 ? std::min(order.size(), size_t(top_k)) : order.size();
  std::partial_sort(order.begin(), order.begin() + long(keep), order.end(),
                    [&](int a, int b) { return logits[size_t(a)] > logits[size_t(b)]; });
  if (temperature <= 0) return order[0];
  std::vector<double> weight(keep);
  const double top = logits[size_t(order[0])];
  for (size_t i = 0; i < keep; ++i) weight[i] = std::exp((logits[size_t(order[i])] - top) / temperature);
  std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
  return order[pick(rng)];
}

}  // namespace

std::string run_tokenizer(const std::string& run_dir, const std::string& train_shards) {
  const fs::path beside_run = fs::path(run_dir) / "tokenizer.bpe";
  if (fs::exists(beside_run)) return beside_run.string();
  const std::string beside_shards = tokenizer_beside(train_shards);
  if (fs::exists(beside_shards)) return beside_shards;
  return "";
}

void sample_text(const SampleOptions& o) {
  const std::string step_dir = newest_checkpoint(o.run_dir);
  Config cfg = checkpoint_config(step_dir);
  if (!o.device.empty() && !value_of(o.device, cfg.precision.device))
    throw UserError("--device " + o.device + ": expected auto, cpu, cuda or cpu-strict");
  const ModelConfig& m = cfg.model;

  const std::string tokenizer_path = run_tokenizer(o.run_dir, cfg.data.train);
  const Bpe tokenizer = tokenizer_path.empty() ? Bpe::byte_level() : Bpe::load(tokenizer_path);
  // Byte-level runs have no tokenizer file: name the checkpoint instead of an empty path.
  const std::string tokenizer_name = tokenizer_path.empty() ? step_dir + ": the byte-level tokenizer (no tokenizer.bpe "
                                                              "beside the run or its training shards)"
                                                            : tokenizer_path;
  if (tokenizer.vocab() > m.vocab_size)
    throw UserError(tokenizer_name + " has a vocabulary of " + std::to_string(tokenizer.vocab()) +
                    " tokens, more than the checkpoint's model.vocab_size = " + std::to_string(m.vocab_size) +
                    ": the model cannot read every token it would be given");
  if (o.top_k > m.vocab_size)
    throw UserError("--top-k " + std::to_string(o.top_k) + " is more than the model's " + std::to_string(m.vocab_size) +
                    " tokens (model.vocab_size): use at most that, or 0 to draw among all");
  std::vector<uint16_t> prompt{uint16_t(Bpe::kDocumentStart)};
  tokenizer.encode(o.prompt, prompt);
  if (int(prompt.size()) >= m.seq_len)
    throw UserError("--prompt: " + std::to_string(prompt.size()) + " tokens with the document start; the model reads " +
                    std::to_string(m.seq_len) + " positions (model.seq_len): shorten it");

  const Device chosen(choose_device(cfg, 1));
  const DeviceChoice& device = chosen.choice;
  {
    Model model(m, uint64_t(cfg.run.seed), device.backend, {}, 1);
    const TrainState state = load_model(model, step_dir);
    const int room = m.seq_len - int(prompt.size()), n = std::min(o.tokens, room);
    std::fprintf(stderr, "sample: %s, step %lld (%s); %s; %s; %d new tokens%s, temperature %g, top-k %d, seed %llu\n",
                 o.run_dir.c_str(), state.step, step_dir.c_str(), device.description.c_str(),
                 tokenizer_path.empty()
                     ? "byte-level tokens"
                     : (tokenizer_path + ", " + std::to_string(tokenizer.vocab()) + " tokens").c_str(),
                 n, n < o.tokens ? (" (model.seq_len = " + std::to_string(m.seq_len) + " positions)").c_str() : "",
                 o.temperature, o.top_k, (unsigned long long)o.seed);

    Decoder decoder(m, model.params, m.seq_len);
    std::vector<float> logits;
    for (uint16_t id : prompt) logits = decoder.step(id);
    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
    std::mt19937_64 rng(o.seed);
    std::vector<uint16_t> drawn;
    size_t printed = 0;
    const auto start = std::chrono::steady_clock::now();
    bool ended = false;
    for (int i = 0; i < n; ++i) {
      const int next = draw(logits, o.temperature, o.top_k, rng);
      if (next == Bpe::kDocumentStart) {
        ended = true;
        break;
      }
      drawn.push_back(uint16_t(next));
      // A token may be a piece of a longer character: print the bytes as they come.
      const std::string text = tokenizer.decode(drawn);
      std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
      std::fflush(stdout);
      printed = text.size();
      if (i + 1 < n) logits = decoder.step(next);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fputs("\n", stdout);
    std::fflush(stdout);
    std::fprintf(stderr, "sample: %zu tokens in %.2f s (%.0f tokens/s)%s\n", drawn.size(), seconds,
                 double(drawn.size()) / std::max(seconds, 1e-9), ended ? "; the model ended the document" : "");
  }
}

}  // namespace mt
