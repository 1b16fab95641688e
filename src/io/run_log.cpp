#include "io/run_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "ops/backend/counters.hpp"
#include "util/error.hpp"

namespace mt {

namespace {
using Scalar = double StepRecord::*;
const std::pair<const char*, Scalar> kScalars[] = {
    {"loss", &StepRecord::loss},
    {"aux_loss", &StepRecord::aux_loss},
    {"mtp_loss", &StepRecord::mtp_loss},
    {"lr", &StepRecord::lr},
    {"grad_norm", &StepRecord::grad_norm},
    {"tokens_per_s", &StepRecord::tokens_per_s},
    {"flops_per_s", &StepRecord::flops_per_s},
    {"mfu", &StepRecord::mfu},
    {"time/forward", &StepRecord::time_forward},
    {"time/backward", &StepRecord::time_backward},
    {"time/optimizer", &StepRecord::time_optimizer},
    {"time/step", &StepRecord::time_step},
};

// The previous log's rows, read back for a resumed run.
struct OldRows {
  std::vector<long long> steps, eval_steps;
  std::map<std::string, std::vector<double>> scalars;
  std::vector<float> load, bias, phases;
  std::vector<float> max_logit, clipped_heads;  // empty: a log without QK-Clip's series
  std::vector<long long> counters, op_launches;  // empty: a log written before the counters
  std::vector<double> eval_loss;
  size_t rows = 0, eval_rows = 0;  // complete rows: every dataset has them
  size_t phase_floats = 0;         // ranks x phases of the run that wrote the timings
  std::string config_changes;      // its attribute config_changes ("" without one)
};

// The lines "step N: ..." of `history` with N <= step, and `line` after them.
std::string changes_up_to(const std::string& history, long long step, const std::string& line) {
  std::string out;
  size_t from = 0;
  while (from < history.size()) {
    const size_t end = std::min(history.find('\n', from), history.size());
    const std::string l = history.substr(from, end - from);
    if (l.rfind("step ", 0) == 0 && std::strtoll(l.c_str() + 5, nullptr, 10) <= step) out += l + "\n";
    from = end + 1;
  }
  return line.empty() ? out : out + line + "\n";
}

OldRows read_old(const std::string& path, size_t moe_floats) {
  OldRows o;
  h5::Handle f = h5::open_file(path, true);
  o.steps = h5::read_all<long long>(f, "/step", H5T_NATIVE_LLONG);
  o.rows = o.steps.size();
  for (auto& [name, member] : kScalars) {
    o.scalars[name] = h5::read_all<double>(f, std::string("/") + name, H5T_NATIVE_DOUBLE);
    o.rows = std::min(o.rows, o.scalars[name].size());
  }
  if (moe_floats > 0) {
    o.load = h5::read_all<float>(f, "/moe/expert_load", H5T_NATIVE_FLOAT);
    o.bias = h5::read_all<float>(f, "/moe/expert_bias", H5T_NATIVE_FLOAT);
    o.rows = std::min({o.rows, o.load.size() / moe_floats, o.bias.size() / moe_floats});
  }
  if (h5::exists(f, "/attention/max_logit") && h5::exists(f, "/attention/clipped_heads")) {
    o.max_logit = h5::read_all<float>(f, "/attention/max_logit", H5T_NATIVE_FLOAT);
    o.clipped_heads = h5::read_all<float>(f, "/attention/clipped_heads", H5T_NATIVE_FLOAT);
  }
  if (h5::exists(f, "/timing/rank_phases")) {
    o.phases = h5::read_all<float>(f, "/timing/rank_phases", H5T_NATIVE_FLOAT);
    h5::Handle d(h5::check(H5Dopen2(f, "/timing/rank_phases", H5P_DEFAULT), "opening /timing/rank_phases"), H5Dclose);
    h5::Handle space(H5Dget_space(d), H5Sclose);
    const std::vector<hsize_t> dims = h5::extent(space, "opening /timing/rank_phases");
    if (dims.size() == 3) o.phase_floats = size_t(dims[1] * dims[2]);
  }
  if (h5::exists(f, "/counters/step") && h5::exists(f, "/counters/op_launches")) {
    o.counters = h5::read_all<long long>(f, "/counters/step", H5T_NATIVE_LLONG);
    o.op_launches = h5::read_all<long long>(f, "/counters/op_launches", H5T_NATIVE_LLONG);
  }
  o.eval_steps = h5::read_all<long long>(f, "/eval/step", H5T_NATIVE_LLONG);
  o.eval_loss = h5::read_all<double>(f, "/eval/loss", H5T_NATIVE_DOUBLE);
  o.eval_rows = std::min(o.eval_steps.size(), o.eval_loss.size());
  if (H5Aexists(f, "config_changes") > 0) o.config_changes = h5::read_string_attr(f, "config_changes");
  return o;
}
// QK-Clip's rows of kept step i, unknown (NaN) where the old log has none (QK-Clip was off).
void keep_attention_rows(const OldRows& old, size_t i, size_t n, StepRecord& r) {
  if (old.max_logit.size() >= (i + 1) * n && old.clipped_heads.size() >= (i + 1) * n) {
    r.max_logit.assign(old.max_logit.begin() + long(i * n), old.max_logit.begin() + long((i + 1) * n));
    r.clipped_heads.assign(old.clipped_heads.begin() + long(i * n), old.clipped_heads.begin() + long((i + 1) * n));
  } else {
    r.max_logit.assign(n, NAN);
    r.clipped_heads.assign(n, NAN);
  }
}

}  // namespace

std::string damaged_log_advice(const std::string& run_dir) {
  const std::string log = run_dir + "/log.h5", aside = "(mv " + log + " " + log + ".damaged)";
  if (!std::filesystem::is_directory(run_dir + "/ckpt"))
    return "the log is damaged, and the run has no checkpoints (" + run_dir + "/ckpt): put back a copy of the log "
           "if you keep one, or move it aside " + aside + " and train again from the start";
  return "the log is damaged; the checkpoints in " + run_dir + "/ckpt are separate files and not affected (`moetrain "
         "sample " + run_dir + "` reads them). To resume, put back a copy of the log if you keep one, or move it " +
         "aside " + aside + " and train again: the run resumes from its newest checkpoint and starts a new log there";
}

std::vector<std::string> log_scalar_names() {
  std::vector<std::string> names;
  for (auto& [name, member] : kScalars) names.push_back(name);
  return names;
}

RunLog::RunLog(const std::string& path, const RunFacts& facts, long long resume_step) : path_(path) {
  h5::silence_errors();
  row_floats_ = facts.moe_layers * facts.experts;
  phase_floats_ = facts.ranks * kPhases;
  attention_floats_ = facts.attention_layers;
  OldRows old;
  const bool keep = resume_step > 0 && std::filesystem::exists(path);
  if (keep) {
    try {
      old = read_old(path, size_t(row_floats_));
    } catch (const UserError& e) {
      throw UserError(path + ": cannot read the log to keep its rows up to step " + std::to_string(resume_step) + ": " +
                      e.what() + "; move it aside to start a new log at step " + std::to_string(resume_step + 1) +
                      " (mv " + path + " " + path + ".damaged; the checkpoints are not affected)");
    }
  }
  // Build the new log beside the old one and swap it in, so the old rows survive a crash here.
  const std::string tmp = path + ".tmp";
  try {
    RunFacts with_changes = facts;
    const std::string changes = changes_up_to(old.config_changes, resume_step, facts.config_change);
    if (!changes.empty()) with_changes.texts["config_changes"] = changes;
    create(tmp, with_changes);
    for (size_t i = 0; i < old.rows && old.steps[i] <= resume_step; ++i) {
      StepRecord r;
      r.step = old.steps[i];
      for (auto& [name, member] : kScalars) r.*member = old.scalars.at(name)[i];
      r.expert_load.assign(old.load.begin() + i * row_floats_, old.load.begin() + (i + 1) * row_floats_);
      r.expert_bias.assign(old.bias.begin() + i * row_floats_, old.bias.begin() + (i + 1) * row_floats_);
      keep_attention_rows(old, i, size_t(attention_floats_), r);
      // Timings of a layout with another number of ranks do not fit the table: unknown.
      if (old.phase_floats == size_t(phase_floats_) && old.phases.size() >= (i + 1) * phase_floats_)
        r.rank_phases.assign(old.phases.begin() + i * phase_floats_, old.phases.begin() + (i + 1) * phase_floats_);
      else
        r.rank_phases.assign(phase_floats_, NAN);
      // Counters of a log without them, or of another op list, stay unknown (-1).
      const size_t kinds = size_t(op_kind_count());
      const bool counted = old.op_launches.size() == old.counters.size() / kCounters * kinds;
      if (counted && old.counters.size() >= (i + 1) * kCounters) {
        r.counters.assign(old.counters.begin() + i * kCounters, old.counters.begin() + (i + 1) * kCounters);
        r.op_launches.assign(old.op_launches.begin() + i * kinds, old.op_launches.begin() + (i + 1) * kinds);
      }
      write_row(r);
    }
    for (size_t i = 0; i < old.eval_rows && old.eval_steps[i] <= resume_step; ++i)
      write_eval(old.eval_steps[i], old.eval_loss[i]);
    h5::check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "flushing");
  } catch (const UserError& e) {
    series_.clear();
    file_.reset();
    std::filesystem::remove(tmp);
    throw UserError(tmp + ": cannot write the log: " + std::string(e.what()) + "; " + path + " is as it was");
  }
  std::filesystem::rename(tmp, path);
}

void RunLog::create(const std::string& path, const RunFacts& facts) {
  file_ = h5::create_file(path, true);
  h5::write_string_attr(file_, "config_toml", facts.config_toml);
  for (auto& [k, v] : facts.numbers) h5::write_double_attr(file_, k, v);
  for (auto& [k, v] : facts.texts) h5::write_string_attr(file_, k, v);
  // SWMR forbids creating objects later: every dataset exists before writing starts.
  series_["step"] = h5::create_series(file_, "/step", H5T_STD_I64LE, {});
  for (auto& [name, member] : kScalars)
    series_[name] = h5::create_series(file_, std::string("/") + name, H5T_IEEE_F64LE, {});
  if (row_floats_ > 0) {  // a model of dense blocks only has no expert statistics
    const std::vector<hsize_t> moe_shape{hsize_t(facts.moe_layers), hsize_t(facts.experts)};
    series_["expert_load"] = h5::create_series(file_, "/moe/expert_load", H5T_IEEE_F32LE, moe_shape);
    series_["expert_bias"] = h5::create_series(file_, "/moe/expert_bias", H5T_IEEE_F32LE, moe_shape);
  }
  if (attention_floats_ > 0) {
    const std::vector<hsize_t> layers{hsize_t(attention_floats_)};
    series_["max_logit"] = h5::create_series(file_, "/attention/max_logit", H5T_IEEE_F32LE, layers);
    series_["clipped_heads"] = h5::create_series(file_, "/attention/clipped_heads", H5T_IEEE_F32LE, layers);
  }
  series_["rank_phases"] =
      h5::create_series(file_, "/timing/rank_phases", H5T_IEEE_F32LE, {hsize_t(facts.ranks), hsize_t(kPhases)});
  h5::write_string_attr(series_["rank_phases"], "phases", kPhaseNames);
  series_["counters"] = h5::create_series(file_, "/counters/step", H5T_STD_I64LE, {hsize_t(kCounters)});
  h5::write_string_attr(series_["counters"], "fields", kCounterNames);
  series_["op_launches"] =
      h5::create_series(file_, "/counters/op_launches", H5T_STD_I64LE, {hsize_t(op_kind_count())});
  std::string kinds;
  for (int k = 0; k < op_kind_count(); ++k) {
    if (k) kinds += ',';
    kinds += op_kind_name(k);
  }
  h5::write_string_attr(series_["op_launches"], "kinds", kinds);
  series_["eval_step"] = h5::create_series(file_, "/eval/step", H5T_STD_I64LE, {});
  series_["eval_loss"] = h5::create_series(file_, "/eval/loss", H5T_IEEE_F64LE, {});
  h5::check(H5Fstart_swmr_write(file_), "starting SWMR on " + path);
}

RunLog::~RunLog() {
  series_.clear();
  file_.reset();
}

void RunLog::write_row(const StepRecord& r) {
  MT_CHECK(int(r.expert_load.size()) == row_floats_ && int(r.expert_bias.size()) == row_floats_);
  MT_CHECK(int(r.rank_phases.size()) == phase_floats_);
  h5::append_rows(series_["step"], H5T_NATIVE_LLONG, &r.step, 1);
  for (auto& [name, member] : kScalars) h5::append_rows(series_[name], H5T_NATIVE_DOUBLE, &(r.*member), 1);
  if (row_floats_ > 0) {
    h5::append_rows(series_["expert_load"], H5T_NATIVE_FLOAT, r.expert_load.data(), 1);
    h5::append_rows(series_["expert_bias"], H5T_NATIVE_FLOAT, r.expert_bias.data(), 1);
  }
  if (attention_floats_ > 0) {
    MT_CHECK(int(r.max_logit.size()) == attention_floats_ && int(r.clipped_heads.size()) == attention_floats_);
    h5::append_rows(series_["max_logit"], H5T_NATIVE_FLOAT, r.max_logit.data(), 1);
    h5::append_rows(series_["clipped_heads"], H5T_NATIVE_FLOAT, r.clipped_heads.data(), 1);
  }
  h5::append_rows(series_["rank_phases"], H5T_NATIVE_FLOAT, r.rank_phases.data(), 1);
  const std::vector<long long> unknown_counters(kCounters, -1), unknown_ops(size_t(op_kind_count()), -1);
  const bool known = r.counters.size() == size_t(kCounters) && r.op_launches.size() == size_t(op_kind_count());
  h5::append_rows(series_["counters"], H5T_NATIVE_LLONG, (known ? r.counters : unknown_counters).data(), 1);
  h5::append_rows(series_["op_launches"], H5T_NATIVE_LLONG, (known ? r.op_launches : unknown_ops).data(), 1);
}

void RunLog::write_eval(long long step, double loss) {
  h5::append_rows(series_["eval_step"], H5T_NATIVE_LLONG, &step, 1);
  h5::append_rows(series_["eval_loss"], H5T_NATIVE_DOUBLE, &loss, 1);
}

void RunLog::append(const StepRecord& r) {
  try {
    write_row(r);
    h5::check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "flushing");
  } catch (const UserError& e) {
    throw UserError(path_ + ": cannot log step " + std::to_string(r.step) + ": " + e.what());
  }
}

void RunLog::append_eval(long long step, double loss) {
  try {
    write_eval(step, loss);
    h5::check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "flushing");
  } catch (const UserError& e) {
    throw UserError(path_ + ": cannot log the eval loss of step " + std::to_string(step) + ": " + e.what());
  }
}

}  // namespace mt
