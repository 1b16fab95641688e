#include "inspect/report_text.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "inspect/highlights.hpp"
#include "inspect/moe_layer_name.hpp"

namespace mt {

namespace {

std::string format(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  std::string out(size_t(std::vsnprintf(nullptr, 0, fmt, args)), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  va_end(args);
  return out;
}

// "label       text\n", the texts aligned in one column.
std::string line(const std::string& label, const std::string& text) {
  return label + std::string(label.size() < 12 ? 12 - label.size() : 1, ' ') + text + "\n";
}

std::string bytes(long long n) {
  if (n < 1024) return format("%lld B", n);
  if (n < 1024 * 1024) return format("%.1f KiB", n / 1024.0);
  if (n < 1024LL * 1024 * 1024) return format("%.1f MiB", n / (1024.0 * 1024.0));
  return format("%.2f GiB", n / (1024.0 * 1024.0 * 1024.0));
}

std::string checkpoints_line(const CheckpointList& list) {
  std::string text;
  for (long long step : list.complete) text += (text.empty() ? "step " : ", ") + std::to_string(step);
  if (text.empty()) text = "none complete";
  for (const std::string& name : list.incomplete) text += "; incomplete: " + name + " (no manifest.toml)";
  return text;
}

}  // namespace

std::string run_text(const RunSummary& s) {
  std::string out = line("run", s.dir + (s.name.empty() ? "" : " (run.name " + s.name + ")"));
  out += line("status", s.status_text());
  const auto highlights = config_highlights(s.config);
  out += line(highlights.front().first, highlights.front().second);
  // In millions; "?" for a fact the log lacks (a damaged or foreign file).
  auto millions = [&](const std::string& key, const char* fmt) {
    return s.numbers.count(key) ? format(fmt, s.numbers.at(key) / 1e6) : std::string("?");
  };
  out += line("params", millions("total_params", "%.3fM") + " total, " + millions("active_params", "%.3fM") +
                            " active per token; " + millions("flops_per_token", "%.2f") +
                            " MFLOP per token (training)");
  for (size_t i = 1; i < highlights.size(); ++i) out += line(highlights[i].first, highlights[i].second);
  out += line("layout", s.texts.count("layout") ? s.texts.at("layout") : "?");
  out += line("device", s.texts.count("device") ? s.texts.at("device") : "?");
  const long long tokens = s.steps_done * s.tokens_per_step, total = s.steps_total * s.tokens_per_step;
  out += line("progress", format("%lld of %lld steps, %lld of %lld tokens (%.1f%%)", s.steps_done, s.steps_total,
                                 tokens, total, total > 0 ? 100.0 * tokens / total : 0.0));
  if (s.rows == 0) {
    out += line("loss", "no step logged yet");
  } else {
    out += line("loss", format("last %.4f at step %lld; mean of the last %zu steps %.4f", s.loss_last, s.steps_done,
                               s.window, s.loss_smoothed));
    out += line("best loss", format("%.4f at step %lld; best mean of %zu steps %.4f, steps %lld-%lld", s.loss_best,
                                    s.loss_best_step, s.window, s.loss_best_smoothed, s.best_first_step,
                                    s.best_last_step));
    if (s.numbers.count("unigram_entropy"))
      out += line("", format("(unigram entropy of the data %.4f: the loss of a model that ignores context)",
                             s.numbers.at("unigram_entropy")));
  }
  out += line("val loss", s.has_eval ? format("last %.4f at step %lld; best %.4f at step %lld", s.val_last,
                                              s.val_last_step, s.val_best, s.val_best_step)
                                     : std::string("none logged"));
  if (s.rows > 0)
    out += line("speed", format("%.0f tok/s, MFU %s (medians over %s)", s.tokens_per_s,
                                std::isnan(s.mfu) ? "n/a" : format("%.1f%%", 100 * s.mfu).c_str(),
                                s.rows > 1 ? "the logged steps after the first" : "the one logged step"));
  if (!s.imbalance.empty()) {
    out += line("experts", "load imbalance (busiest expert / mean; 1 is even), first 10% of steps -> last 10%");
    for (size_t i = 0; i < s.imbalance.size(); ++i)
      out += line("", format("  %-14s %5.2f -> %5.2f", moe_layer_name(s.config, i).c_str(), s.imbalance[i].first,
                             s.imbalance[i].last));
  }
  out += line("checkpoints", checkpoints_line(s.checkpoints));
  return out;
}

std::string checkpoint_text(const CheckpointSummary& s) {
  std::string out = line("checkpoint", s.dir);
  out += line("status", s.complete ? "complete (manifest.toml present)"
                                   : "incomplete: no manifest.toml (a write cut short; never resumed from)");
  out += line("step", format("%lld, %lld sequences seen (%lld tokens)", s.step, s.samples_seen,
                             s.samples_seen * config_int(s.config, "model.seq_len", 0)));
  out += line("layout", s.layout + format(", world size %lld", s.world_size));
  out += line("seed", std::to_string(s.seed));
  std::string files;
  long long total = 0;
  for (const auto& [name, size] : s.files) {
    files += (files.empty() ? "" : ", ") + name;
    total += size;
  }
  out += line("files", format("%zu of %lld (%s): ", s.files.size(), s.world_size, bytes(total).c_str()) + files);
  for (const char* group : {"params", "optim", "buffers"})
    if (const auto it = s.groups.find(group); it != s.groups.end())
      out += line(group, format("%lld arrays, %lld values, %s", it->second.arrays, it->second.elements,
                                bytes(it->second.bytes).c_str()));
  for (const auto& [label, text] : config_highlights(s.config)) out += line(label, text);
  return out;
}

}  // namespace mt
