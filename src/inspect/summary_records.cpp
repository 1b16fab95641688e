#include "inspect/summary_records.hpp"

#include <cmath>

namespace mt {

Record run_record(const RunSummary& s) {
  auto number = [&](const std::string& key) { return number_cell(s.numbers.count(key) ? s.numbers.at(key) : NAN); };
  auto text = [&](const std::string& key) { return text_cell(s.texts.count(key) ? s.texts.at(key) : ""); };
  // Absent values are null (JSON) and empty (CSV): no steps logged yet, no evaluation yet.
  auto step = [](bool present, long long step) { return present ? integer_cell(step) : number_cell(NAN); };
  const bool logged = s.rows > 0;
  std::vector<double> first, last;
  for (const Imbalance& i : s.imbalance) first.push_back(i.first), last.push_back(i.last);
  Record r;
  r.fields = {
      {"dir", text_cell(s.dir)},
      {"name", text_cell(s.name)},
      {"status", text_cell(s.status())},
      {"steps", integer_cell(s.steps_done)},
      {"steps_total", integer_cell(s.steps_total)},
      {"tokens", integer_cell(s.steps_done * s.tokens_per_step)},
      {"tokens_total", integer_cell(s.steps_total * s.tokens_per_step)},
      {"loss_last", number_cell(s.loss_last)},
      {"loss_smoothed", number_cell(s.loss_smoothed)},
      {"smooth_window", integer_cell((long long)s.window)},
      {"loss_best", number_cell(s.loss_best)},
      {"loss_best_step", step(logged, s.loss_best_step)},
      {"loss_best_smoothed", number_cell(s.loss_best_smoothed)},
      {"loss_best_first_step", step(logged, s.best_first_step)},
      {"loss_best_last_step", step(logged, s.best_last_step)},
      {"val_loss_last", number_cell(s.has_eval ? s.val_last : NAN)},
      {"val_loss_last_step", step(s.has_eval, s.val_last_step)},
      {"val_loss_best", number_cell(s.has_eval ? s.val_best : NAN)},
      {"val_loss_best_step", step(s.has_eval, s.val_best_step)},
      {"tokens_per_s", number_cell(logged ? s.tokens_per_s : NAN)},
      {"mfu", number_cell(logged ? s.mfu : NAN)},
      {"total_params", number("total_params")},
      {"active_params", number("active_params")},
      {"flops_per_token", number("flops_per_token")},
      {"device", text("device")},
      {"layout", text("layout")},
      {"imbalance_first", numbers_cell(first)},
      {"imbalance_last", numbers_cell(last)},
      {"checkpoints", integers_cell(s.checkpoints.complete)},
      {"incomplete_checkpoints", texts_cell(s.checkpoints.incomplete)},
  };
  r.config = &s.config;
  return r;
}

Record checkpoint_record(const CheckpointSummary& s) {
  std::vector<std::string> files;
  long long bytes = 0;
  for (const auto& [name, size] : s.files) files.push_back(name), bytes += size;
  Record r;
  r.fields = {
      {"dir", text_cell(s.dir)},
      {"complete", bool_cell(s.complete)},
      {"step", integer_cell(s.step)},
      {"samples_seen", integer_cell(s.samples_seen)},
      {"world_size", integer_cell(s.world_size)},
      {"seed", integer_cell(s.seed)},
      {"layout", text_cell(s.layout)},
      {"files", texts_cell(files)},
      {"bytes", integer_cell(bytes)},
  };
  for (const char* group : {"params", "optim", "buffers"}) {
    const auto it = s.groups.find(group);
    const ArrayCount c = it == s.groups.end() ? ArrayCount{} : it->second;
    r.fields.emplace_back(std::string(group) + "_arrays", integer_cell(c.arrays));
    r.fields.emplace_back(std::string(group) + "_values", integer_cell(c.elements));
    r.fields.emplace_back(std::string(group) + "_bytes", integer_cell(c.bytes));
  }
  r.config = &s.config;
  return r;
}

}  // namespace mt
