// Software profile loading: every key optional, unknown keys refused, values range-checked.
#include "plan/software.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "util/error.hpp"
#include "util/toml_file.hpp"

namespace mt::plan {

const std::vector<std::string>& software_names() {
  static const std::vector<std::string> names = {"moetrain", "megatron", "torchtitan", "maxtext", "deepseek", "other"};
  return names;
}

namespace {

std::string name_list() {
  std::string list;
  for (const auto& n : software_names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

std::optional<bool> flag(const std::string& path, const toml::node& v, const std::string& key) {
  if (!v.is_boolean()) throw UserError(toml_position(path, v) + ": software." + key + " must be true or false");
  return v.value<bool>().value();
}

void read_key(SoftwareProfile& p, const std::string& key, const toml::node& v) {
  if (key == "overlap_tp") p.overlap_tp = flag(p.path, v, key);
  else if (key == "overlap_dp") p.overlap_dp = flag(p.path, v, key);
  else if (key == "overlap_ep") p.overlap_ep = flag(p.path, v, key);
  else if (key == "fp8_dispatch") p.fp8_dispatch = flag(p.path, v, key);
  else if (key == "comm_sm_share") {
    const double x = v.value<double>().value_or(-1);
    if (!v.is_number() || x < 0 || x > 0.9)
      throw UserError(toml_position(p.path, v) + ": software.comm_sm_share must be a number in [0, 0.9]");
    p.comm_sm_share = x;
  } else if (key == "matmul_factor") {
    const double x = v.value<double>().value_or(-1);
    if (!v.is_number() || x < 0.1 || x > 1.5)
      throw UserError(toml_position(p.path, v) + ": software.matmul_factor must be a number in [0.1, 1.5]");
    p.matmul_factor = x;
  } else if (key == "attention") {
    const std::string a = v.value<std::string>().value_or("");
    if (a != "fused" && a != "materialized")
      throw UserError(toml_position(p.path, v) + ": software.attention must be \"fused\" or \"materialized\"");
    p.attention_materialized = a == "materialized";
  } else {
    throw UserError(toml_position(p.path, v) + ": unknown key software." + key +
                    "; valid: name, attention, overlap_tp, overlap_dp, overlap_ep, comm_sm_share, fp8_dispatch, "
                    "matmul_factor");
  }
}

}  // namespace

SoftwareProfile load_software(const std::string& dir, const std::string& name) {
  const auto& names = software_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw UserError("software \"" + name + "\" is not a known trainer; valid: " + name_list());
  SoftwareProfile p;
  p.name = name;
  p.path = (std::filesystem::path(dir) / (name + ".toml")).string();
  const toml::table root = parse_toml_file(p.path, "the software profile");
  const toml::table* sw = root["software"].as_table();
  if (!sw || root.size() != 1)
    throw UserError(p.path + ": a software profile holds one [software] table (see configs/software/)");
  const toml::node* n = sw->get("name");
  if (!n || n->value<std::string>().value_or("") != name)
    throw UserError(p.path + ": software.name must be \"" + name + "\", the file's own name");
  for (const auto& [k, v] : *sw)
    if (k.str() != "name") read_key(p, std::string(k.str()), v);
  return p;
}

void SoftwareProfile::apply_to(Cluster& c) const {
  c.software = name;
  if (overlap_tp) c.overlap_tp = *overlap_tp;
  if (overlap_dp) c.overlap_dp = *overlap_dp;
  if (overlap_ep) c.overlap_ep = *overlap_ep;
  if (fp8_dispatch) c.fp8_dispatch = *fp8_dispatch;
  if (attention_materialized) c.attention_materialized = *attention_materialized;
  if (comm_sm_share) c.comm_sm_share = *comm_sm_share;
  if (matmul_factor) {
    c.matmul_efficiency_bf16 *= *matmul_factor / c.software_matmul_factor;
    c.matmul_efficiency_fp8 *= *matmul_factor / c.software_matmul_factor;
    c.software_matmul_factor = *matmul_factor;
  }
}

std::string SoftwareProfile::settings() const {
  std::string out;
  auto add = [&](const std::string& key, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += key;
    out += '=';
    out += value;
  };
  auto text = [](bool b) { return std::string(b ? "true" : "false"); };
  if (attention_materialized) add("attention", *attention_materialized ? "materialized" : "fused");
  if (overlap_tp) add("overlap_tp", text(*overlap_tp));
  if (overlap_dp) add("overlap_dp", text(*overlap_dp));
  if (overlap_ep) add("overlap_ep", text(*overlap_ep));
  if (comm_sm_share) add("comm_sm_share", std::to_string(*comm_sm_share).substr(0, 4));
  if (fp8_dispatch) add("fp8_dispatch", text(*fp8_dispatch));
  if (matmul_factor) add("matmul_factor", std::to_string(*matmul_factor).substr(0, 5));
  return out.empty() ? "nothing (the cluster profile's [software] holds)" : out;
}

std::string software_explained(const Cluster& c, const SoftwareProfile& p) {
  char fitted[300];
  std::snprintf(fitted, sizeof fitted,
                "fitted numbers (%s): matmul_bf16 %.3f, matmul_fp8 %.3f, activation_passes %.1f, bus %.2f; "
                "each profile's comments name the runs they were fitted to\n",
                c.path.c_str(), c.matmul_efficiency_bf16, c.matmul_efficiency_fp8, c.activation_passes,
                c.bus_efficiency);
  return "software: " + p.name + " (" + p.path + ") sets " + p.settings() + "\n" + fitted;
}

std::string software_dir_for(const std::string& cluster_path) {
  const std::filesystem::path beside = std::filesystem::path(cluster_path).parent_path().parent_path() / "software";
  std::error_code ec;
  if (std::filesystem::is_directory(beside, ec)) return beside.string();
  return "configs/software";
}

}  // namespace mt::plan
