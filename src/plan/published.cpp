// Published runs: loading, prediction, and the error report.
#include "plan/published.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "config/config.hpp"
#include "model/flops.hpp"
#include "plan/software.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/toml_file.hpp"

namespace mt::plan {

namespace {

// FLOPs of one training step as the publisher counted them, to turn FLOP/s into a step time.
double published_flops(const ModelConfig& m, double tokens, const std::string& convention) {
  if (convention == "causal") return training_flops_per_token(m) * tokens;
  // The whole attention matrix (Megatron-LM's and PaLM's count): the causal core twice.
  if (convention == "full")
    return (training_flops_per_token(m) + 3 * attention_core_forward_flops_per_token(m)) * tokens;
  // Narayanan et al. 2021 eq. (3): a GPT with a 4h MLP, full recomputation counted.
  const double s = m.seq_len, h = m.d_model, L = m.n_layers, V = m.vocab_size, B = tokens / s;
  return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
}

// A model table ([models.NAME]) read as an experiment's [model] table, so that every key, type
// and range check of `train` applies.
ModelConfig model_of(const std::string& path, const std::string& name, const toml::table& t, int seq_len) {
  toml::table copy = t;
  copy.erase("source");
  if (seq_len > 0) copy.insert_or_assign("seq_len", seq_len);
  toml::table root;
  root.insert("model", copy);
  std::ostringstream text;
  text << root;
  return parse_config(text.str(), path + " [models." + name + "]").model;
}

// One [[runs]] entry of a runs file: its keys read by name, each marked as read, so that what is
// left over is an unknown key.
class RunEntry {
 public:
  RunEntry(const std::string& path, const toml::node& entry) : path(path), entry_(entry), t_(*entry.as_table()) {}

  std::string position() const { return toml_position(path, entry_); }
  const toml::table& table() const { return t_; }

  const toml::node& need(const std::string& key) {
    const toml::node* n = t_.get(key);
    if (!n) throw UserError(position() + ": this run lacks '" + key + "'");
    read_.insert(key);
    return *n;
  }
  // Null when absent.
  const toml::node* optional(const std::string& key) {
    const toml::node* n = t_.get(key);
    if (n) read_.insert(key);
    return n;
  }
  std::string text(const std::string& key) {
    const toml::node& n = need(key);
    if (!n.is_string()) throw UserError(toml_position(path, n) + ": " + key + " must be a string");
    return n.value<std::string>().value();
  }
  int integer(const std::string& key) {
    const toml::node& n = need(key);
    if (!n.is_integer() || n.value<int64_t>().value() < 1)
      throw UserError(toml_position(path, n) + ": " + key + " must be a positive integer");
    return static_cast<int>(n.value<int64_t>().value());
  }
  void refuse_unread() {
    for (const char* k : {"seq_len", "note"}) read_.insert(k);
    for (const auto& [k, v] : t_)
      if (!read_.count(std::string(k.str())))
        throw UserError(toml_position(path, v) + ": unknown key '" + std::string(k.str()) +
                        "' in a run; valid: name, source, origin, trainer, trainer_release, model, cluster, gpus, "
                        "seq_len, global_batch, layout, software, calibration, published, note");
  }

  const std::string& path;

 private:
  const toml::node& entry_;
  const toml::table& t_;
  std::set<std::string> read_;
};

// The run's software table: which overlaps its framework has and its FP8 recipe, on the run's
// copy of the profile.
void read_software(const std::string& path, const toml::node& s, Cluster& cluster) {
  const toml::table* sw = s.as_table();
  if (!sw)
    throw UserError(toml_position(path, s) + ": software must be a table of overlap_tp, overlap_dp, overlap_ep, "
                    "fp8_recipe");
  for (const auto& [k, v] : *sw) {
    if (k.str() == "fp8_recipe") {
      if (!v.is_string() || !parse_fp8_recipe(v.value<std::string>().value(), cluster.fp8_recipe))
        throw UserError(toml_position(path, v) + ": software.fp8_recipe: valid are \"tensor\", \"blockwise\" "
                        "and \"mxfp8\"");
      continue;
    }
    bool* flag = k.str() == "overlap_tp"   ? &cluster.overlap_tp
                 : k.str() == "overlap_dp" ? &cluster.overlap_dp
                 : k.str() == "overlap_ep" ? &cluster.overlap_ep
                                           : nullptr;
    if (!flag || !v.is_boolean())
      throw UserError(toml_position(path, v) + ": software." + std::string(k.str()) +
                      ": valid are overlap_tp, overlap_dp and overlap_ep, true or false, and fp8_recipe");
    *flag = v.value<bool>().value();
  }
}

// The step time a run's published table gives: measured, or implied by its throughput, its FLOP
// rate or its MFU.
double published_step_s(const std::string& path, const toml::node& pub, const PublishedRun& r, int gpus) {
  const toml::table* p = pub.as_table();
  if (!p) throw UserError(toml_position(path, pub) + ": published must be a table");
  const double tokens = double(r.global_batch) * r.model.seq_len;
  auto number = [&](const char* key) {
    const toml::node* n = p->get(key);
    if (!n->is_number() || n->value<double>().value() <= 0)
      throw UserError(toml_position(path, *n) + ": published." + key + " must be a positive number");
    return n->value<double>().value();
  };
  auto convention = [&]() {
    const toml::node* n = p->get("flops");
    const std::string c = n && n->is_string() ? n->value<std::string>().value() : "";
    if (c != "causal" && c != "full" && c != "megatron2021")
      throw UserError(toml_position(path, pub) +
                      ": published.flops must say how the publisher counted FLOPs: causal, full or megatron2021");
    return c;
  };
  double step_s = 0;
  if (p->get("step_s")) {
    step_s = number("step_s");
  } else if (p->get("tokens_per_s_per_gpu")) {
    step_s = tokens / (number("tokens_per_s_per_gpu") * gpus);
  } else if (p->get("tflops_per_gpu")) {
    const double rate = number("tflops_per_gpu") * 1e12;
    step_s = published_flops(r.model, tokens, convention()) / (rate * gpus);
  } else if (p->get("mfu")) {
    const double rate = number("mfu") * r.cluster.accel.bf16_flops;
    step_s = published_flops(r.model, tokens, convention()) / (rate * gpus);
  } else {
    throw UserError(toml_position(path, pub) +
                    ": published needs one of step_s, tokens_per_s_per_gpu, tflops_per_gpu, mfu");
  }
  for (const auto& [k, v] : *p)
    if (k.str() != "step_s" && k.str() != "tokens_per_s_per_gpu" && k.str() != "tflops_per_gpu" &&
        k.str() != "mfu" && k.str() != "flops")
      throw UserError(toml_position(path, v) + ": unknown key published." + std::string(k.str()));
  return step_s;
}

// The run's model: its [models.NAME] table, at the run's sequence length.
void read_model(RunEntry& e, const toml::table& models, const std::string& where, PublishedRun& r) {
  r.model_name = e.text("model");
  const toml::table* model = models.get_as<toml::table>(r.model_name);
  if (!model) throw UserError(where + ": model '" + r.model_name + "' has no [models." + r.model_name + "] table");
  if (!model->get_as<std::string>("source"))
    throw UserError(e.path + ": [models." + r.model_name + "] needs a source (where its dimensions are published)");
  const int seq_len = e.table().get("seq_len") ? e.integer("seq_len") : 0;
  r.model = model_of(e.path, r.model_name, *model, seq_len);
  r.group = r.model.moe.n_routed_experts > 0 && r.model.n_layers > r.model.n_dense_layers ? "moe" : "dense";
}

// The run's trainer, its software profile applied to the run's cluster.
void read_trainer(RunEntry& e, const std::string& where, std::map<std::string, SoftwareProfile>& software,
                  PublishedRun& r) {
  r.trainer = e.text("trainer");
  if (!software.count(r.trainer)) {
    try {
      software[r.trainer] = load_software(software_dir_for(e.path), r.trainer);
    } catch (const UserError& err) {
      throw UserError(where + ": trainer: " + err.what());
    }
  }
  software[r.trainer].apply_to(r.cluster);
  if (e.table().get("trainer_release")) r.trainer_release = e.text("trainer_release");
}

// Profiles read so far, by file name (clusters beside the runs file) and by trainer.
struct Profiles {
  std::map<std::string, Cluster> clusters;
  std::map<std::string, SoftwareProfile> software;
};

PublishedRun read_run(RunEntry& e, const toml::table& models, Profiles& profiles) {
  std::map<std::string, Cluster>& clusters = profiles.clusters;
  PublishedRun r;
  r.name = e.text("name");
  const std::string where = e.position() + " (" + r.name + ")";
  r.source = e.text("source");
  r.origin = e.text("origin");
  if (r.origin.empty())
    throw UserError(where + ": origin must name the run's source group, e.g. \"narayanan2021-table1\"");
  read_model(e, models, where, r);
  const std::string profile = e.text("cluster");
  const std::string dir = std::filesystem::path(e.path).parent_path().string();
  if (!clusters.count(profile)) clusters[profile] = load_cluster((std::filesystem::path(dir) / profile).string());
  r.cluster = clusters[profile];
  const int gpus = e.integer("gpus");
  // A run's cluster is as large as the run.
  r.cluster.accelerators = std::max(gpus, r.cluster.domain);
  read_trainer(e, where, profiles.software, r);
  if (const toml::node* s = e.optional("software")) read_software(e.path, *s, r.cluster);
  r.global_batch = e.integer("global_batch");
  try {
    r.layout = parse_layout(e.text("layout"), gpus);
  } catch (const UserError& err) {
    throw UserError(where + ": " + err.what());
  }
  // The published systems allocate what the all-to-all brings: room for the average arrivals, not
  // the worst case moetrain reserves by default (parallel.ep_receive_bound).
  r.layout.ep_receive_bound = 1;
  if (r.layout.world() != gpus)
    throw UserError(where + ": the layout uses " + std::to_string(r.layout.world()) + " accelerators but gpus = " +
                    std::to_string(gpus));
  r.step_s = published_step_s(e.path, e.need("published"), r, gpus);
  if (const toml::node* n = e.optional("calibration")) {
    if (!n->is_boolean()) throw UserError(toml_position(e.path, *n) + ": calibration must be true or false");
    r.calibration = n->value<bool>().value();
  }
  e.refuse_unread();
  return r;
}

}  // namespace

std::vector<PublishedRun> load_published_runs(const std::string& path) {
  toml::table root = parse_toml_file(path, "the runs file");
  const toml::table* models = root["models"].as_table();
  const toml::array* list = root["runs"].as_array();
  if (!models || !list || list->empty())
    throw UserError(path + ": a runs file holds [models.NAME] tables and [[runs]] entries "
                           "(see configs/published/runs.toml)");
  for (const auto& [k, v] : root)
    if (k.str() != "models" && k.str() != "runs")
      throw UserError(toml_position(path, v) + ": unknown key '" + std::string(k.str()) +
                      "'; a runs file holds models and runs");
  Profiles profiles;
  std::vector<PublishedRun> runs;
  for (const auto& entry : *list) {
    if (!entry.as_table()) throw UserError(toml_position(path, entry) + ": every [[runs]] entry is a table");
    RunEntry e(path, entry);
    runs.push_back(read_run(e, *models, profiles));
  }
  return runs;
}

std::vector<CheckedRun> check_published_runs(const std::vector<PublishedRun>& runs) {
  std::vector<CheckedRun> out;
  for (const PublishedRun& r : runs) {
    if (std::string why = layout_problem(r.model, r.global_batch, r.cluster, r.layout); !why.empty())
      throw UserError("published run '" + r.name + "': the planner refuses its layout " + layout_text(r.layout) + ": " +
                      why);
    CheckedRun c;
    c.run = &r;
    c.estimate = estimate_step(r.model, r.global_batch, r.cluster, r.layout);
    c.error = c.estimate.step_s / r.step_s - 1;
    out.push_back(c);
  }
  return out;
}

// The accelerator's name before its parenthesis: "H100 (Grand Teton, 96 GB HBM2e, 500 W)" is H100.
std::string family_of(const PublishedRun& r) {
  const std::string& accel = r.cluster.accel.name;
  return r.trainer + " " + accel.substr(0, accel.find(" ("));
}

double share_within(const std::vector<CheckedRun>& checked, double bound) {
  if (checked.empty()) return 0;
  const auto n =
      std::count_if(checked.begin(), checked.end(), [&](const CheckedRun& c) { return std::abs(c.error) <= bound; });
  return double(n) / checked.size();
}

std::string published_report(const std::vector<CheckedRun>& checked, const std::vector<double>& left_out) {
  std::ostringstream out;
  out << " #  published s  predicted s   error  fits" << (left_out.empty() ? "" : "  left out") << " | run\n";
  for (size_t i = 0; i < checked.size(); ++i) {
    const CheckedRun& c = checked[i];
    out << format_number("%2.0f", double(i + 1)) << format_number("  %11.3f", c.run->step_s)
        << format_number("  %11.3f", c.estimate.step_s) << format_number("  %+5.1f%%", 100 * c.error)
        << (c.estimate.fits ? "   yes" : "    no")
        << (left_out.empty() ? std::string() : format_number("    %+5.1f%%", 100 * left_out[i])) << " | " << c.run->name
        << (c.run->calibration ? " (calibration)" : "") << "\n";
  }
  // The distribution, overall and by group.
  std::map<std::string, std::vector<CheckedRun>> groups;
  std::vector<CheckedRun> unfitted;
  for (const CheckedRun& c : checked) {
    if (!c.run->calibration) unfitted.push_back(c);
    groups["vendor " + c.run->cluster.accel.vendor].push_back(c);
    groups["kind " + c.run->group].push_back(c);
    groups[std::string("precision ") + (c.run->layout.fp8 ? "fp8" : "bf16")].push_back(c);
  }
  auto line = [&](const std::string& label, const std::vector<CheckedRun>& v) {
    std::vector<double> e;
    for (const CheckedRun& c : v) e.push_back(std::abs(c.error));
    std::sort(e.begin(), e.end());
    const double median = e.size() % 2 ? e[e.size() / 2] : (e[e.size() / 2 - 1] + e[e.size() / 2]) / 2;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%-18s %4zu runs  within 10%%: %3.0f%%  20%%: %3.0f%%  30%%: %3.0f%%"
                  "  median |error| %4.1f%%  worst %5.1f%%\n",
                  label.c_str(), v.size(), 100 * share_within(v, 0.10), 100 * share_within(v, 0.20),
                  100 * share_within(v, 0.30), 100 * median, 100 * e.back());
    out << buf;
  };
  out << "\n";
  line("all", checked);
  line("not calibration", unfitted);
  for (const auto& [label, v] : groups) line(label, v);
  return out.str();
}

}  // namespace mt::plan
