// Cluster profile loading: every key required, unknown keys refused, values range-checked.
#include "plan/cluster.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "util/error.hpp"
#include "util/toml_file.hpp"

namespace mt::plan {

double Cluster::domain_bandwidth(int group) const {
  if (topology != "torus") return scale_up_bandwidth;
  // A group laid along the torus uses as many axes as it needs; each axis gives a ring in both
  // directions when it wraps around, one direction otherwise.
  int axes = 0;
  long covered = 1;
  for (int d : torus.dims) {
    if (covered >= group) break;
    covered *= d;
    ++axes;
  }
  return std::max(axes, 1) * torus.link_bandwidth * (torus.wraparound ? 2.0 : 1.0);
}

namespace {

class Reader {
 public:
  Reader(std::string path, const toml::table& root) : path_(std::move(path)), root_(root) {}

  double number(const std::string& key, double lo, double hi, double& out) {
    const toml::node* n = find(key);
    if (!n->is_number()) throw UserError(toml_position(path_, *n) + ": " + key + " must be a number");
    out = n->value<double>().value();
    if (!(out >= lo && out <= hi))
      throw UserError(toml_position(path_, *n) + ": " + key + " = " + std::to_string(out) + " is outside [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return out;
  }
  void integer(const std::string& key, int lo, int hi, int& out) {
    const toml::node* n = find(key);
    if (!n->is_integer()) throw UserError(toml_position(path_, *n) + ": " + key + " must be an integer");
    int64_t v = n->value<int64_t>().value();
    if (v < lo || v > hi)
      throw UserError(toml_position(path_, *n) + ": " + key + " = " + std::to_string(v) + " is outside [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<int>(v);
  }
  void string(const std::string& key, const std::vector<std::string>& valid, std::string& out) {
    const toml::node* n = find(key);
    if (!n->is_string()) throw UserError(toml_position(path_, *n) + ": " + key + " must be a string");
    out = n->value<std::string>().value();
    if (!valid.empty() && std::find(valid.begin(), valid.end(), out) == valid.end()) {
      std::string list;
      for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
      throw UserError(toml_position(path_, *n) + ": " + key + " = \"" + out + "\" is not one of " + list);
    }
  }
  void boolean(const std::string& key, bool& out) {
    const toml::node* n = find(key);
    if (!n->is_boolean()) throw UserError(toml_position(path_, *n) + ": " + key + " must be true or false");
    out = n->value<bool>().value();
  }
  void int_list(const std::string& key, std::vector<int>& out) {
    const toml::node* n = find(key);
    const toml::array* a = n->as_array();
    if (!a || a->empty())
      throw UserError(toml_position(path_, *n) + ": " + key + " must be a non-empty array of integers");
    for (const auto& e : *a) {
      if (!e.is_integer() || e.value<int64_t>().value() < 1)
        throw UserError(toml_position(path_, e) + ": " + key + " must hold positive integers");
      out.push_back(static_cast<int>(e.value<int64_t>().value()));
    }
  }
  bool has(const std::string& key) const { return root_.at_path(key).node() != nullptr; }

  // Every leaf of the file must have been read.
  void refuse_unknown() const {
    std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t,
                                                                           const std::string& pre) {
      for (const auto& [k, v] : t) {
        std::string key = pre.empty() ? std::string(k.str()) : pre + "." + std::string(k.str());
        if (const auto* sub = v.as_table())
          walk(*sub, key);
        else if (!read_.count(key))
          throw UserError(toml_position(path_, v) + ": unknown key '" + key +
                          "' in a cluster profile (see configs/clusters/h800-deepseek.toml for every key)");
      }
    };
    walk(root_, "");
  }

 private:
  const toml::node* find(const std::string& key) {
    const toml::node* n = root_.at_path(key).node();
    if (!n)
      throw UserError(path_ + ": missing key '" + key + "' (every cluster profile sets it; see configs/clusters/)");
    read_.insert(key);
    return n;
  }

  std::string path_;
  const toml::table& root_;
  std::set<std::string> read_;
};

}  // namespace

Cluster load_cluster(const std::string& path) {
  const toml::table root = parse_toml_file(path, "the cluster profile");
  Cluster c;
  c.path = path;
  Reader r(path, root);
  r.string("cluster.name", {}, c.name);
  r.integer("cluster.accelerators", 1, 1 << 24, c.accelerators);
  r.string("accelerator.name", {}, c.accel.name);
  r.string("accelerator.vendor", {}, c.accel.vendor);
  r.number("accelerator.bf16_flops", 1e9, 1e18, c.accel.bf16_flops);
  r.number("accelerator.fp8_flops", 1e9, 1e18, c.accel.fp8_flops);
  r.number("accelerator.hbm_bytes", 1e6, 1e15, c.accel.hbm_bytes);
  r.number("accelerator.hbm_bandwidth", 1e9, 1e15, c.accel.hbm_bandwidth);
  r.integer("scale_up.domain", 1, 1 << 20, c.domain);
  r.number("scale_up.bandwidth", 1e6, 1e14, c.scale_up_bandwidth);
  r.number("scale_out.bandwidth", 1e6, 1e14, c.scale_out_bandwidth);
  r.string("topology.kind", {"switched", "torus"}, c.topology);
  if (c.topology == "torus") {
    r.int_list("topology.dims", c.torus.dims);
    r.number("topology.link_bandwidth", 1e6, 1e14, c.torus.link_bandwidth);
    r.boolean("topology.wraparound", c.torus.wraparound);
    long chips = 1;
    for (int d : c.torus.dims) chips *= d;
    if (chips != c.domain)
      throw UserError(path + ": topology.dims multiply to " + std::to_string(chips) + " but scale_up.domain = " +
                      std::to_string(c.domain) + "; a torus is one scale-up domain, so they must agree");
  }
  r.number("efficiency.matmul_bf16", 0.01, 1, c.matmul_efficiency_bf16);
  r.number("efficiency.matmul_fp8", 0.01, 1, c.matmul_efficiency_fp8);
  r.number("efficiency.activation_passes", 0, 100, c.activation_passes);
  std::string attention;
  r.string("software.attention", {"fused", "materialized"}, attention);
  c.attention_materialized = attention == "materialized";
  r.boolean("software.overlap_tp", c.overlap_tp);
  r.boolean("software.overlap_dp", c.overlap_dp);
  r.boolean("software.overlap_ep", c.overlap_ep);
  r.number("software.comm_sm_share", 0, 0.9, c.comm_sm_share);
  r.boolean("software.fp8_dispatch", c.fp8_dispatch);
  if (r.has("software.fp8_recipe")) {
    std::string recipe;
    r.string("software.fp8_recipe", {"tensor", "blockwise", "mxfp8"}, recipe);
    parse_fp8_recipe(recipe, c.fp8_recipe);
  }
  r.number("efficiency.bus", 0.01, 1, c.bus_efficiency);
  r.number("efficiency.memory_usable", 0.1, 1, c.memory_usable);
  r.refuse_unknown();
  if (c.accelerators % c.domain != 0 && c.accelerators > c.domain)
    throw UserError(path + ": cluster.accelerators = " + std::to_string(c.accelerators) +
                    " is not a whole number of scale-up domains of " + std::to_string(c.domain));
  return c;
}

}  // namespace mt::plan
