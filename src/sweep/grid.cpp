#include "sweep/grid.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "util/escape.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace mt {

namespace {

// Longest run name: a directory name must stay under the usual 255-byte limit.
constexpr size_t kMaxRunName = 200;

struct Leaf {
  std::string key;  // dotted
  const toml::node* node;
};

// Every non-table value under `t`, keys dotted, in file order (TOML++ iterates keys sorted).
void collect_leaves(const toml::table& t, const std::string& prefix, std::vector<Leaf>& out) {
  for (auto&& [k, v] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) collect_leaves(*v.as_table(), key, out);
    else out.push_back({key, &v});
  }
}

void sort_by_position(std::vector<Leaf>& leaves) {
  auto pos = [](const Leaf& l) { return std::tuple(l.node->source().begin.line, l.node->source().begin.column); };
  std::stable_sort(leaves.begin(), leaves.end(), [&](const Leaf& a, const Leaf& b) { return pos(a) < pos(b); });
}

std::string kind_of(const toml::node& n) {
  if (n.is_array()) return "a list";
  if (n.is_table()) return "a table";
  return "a date or time";
}

// A TOML basic string: TOML reads every escape JSON writes.
std::string quoted(const std::string& s) { return json_string(s); }

// Letters, digits and . _ + - stay; anything else (a '/' in a path, a space, '=' or ',', which
// separate a run name's parts) becomes '_'.
std::string filesystem_safe(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '+' && ch != '-') ch = '_';
  return out;
}

class GridReader {
 public:
  explicit GridReader(const std::string& path) : path_(path) {}

  std::string at(const toml::source_region& r) const {
    return path_ + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
  }
  std::string at(const toml::node& n) const { return at(n.source()); }

  // A number, string or boolean as TOML text and as readable text; empty toml for anything else.
  GridValue value(const std::string& key, const toml::node& n) const {
    GridValue v{key, "", "", at(n)};
    if (auto i = n.as_integer()) {
      v.toml = v.text = std::to_string(i->get());
    } else if (auto f = n.as_floating_point()) {
      char buf[64];
      // Shortest text that reads back as the same double: 0.003, 1e-04.
      const auto end = std::to_chars(buf, buf + sizeof buf, f->get()).ptr;
      v.text = std::string(buf, end);
      v.toml = v.text.find_first_of(".ein") == std::string::npos ? v.text + ".0" : v.text;
    } else if (auto b = n.as_boolean()) {
      v.toml = v.text = b->get() ? "true" : "false";
    } else if (auto s = n.as_string()) {
      v.toml = quoted(s->get());
      v.text = filesystem_safe(s->get());
    }
    return v;
  }

  // The sweep sets these itself: each run's name and directory, and resuming its newest checkpoint.
  void check_not_reserved(const std::string& section, const Leaf& l) const {
    const std::string head = at(*l.node) + ": " + section + " " + l.key + ": ";
    if (l.key == "run.name")
      throw UserError(head + "the sweep names each run after its grid values; leave run.name out");
    if (l.key == "checkpoint.resume")
      throw UserError(head + "the sweep resumes each run from its newest checkpoint itself (checkpoint.resume = "
                      "\"auto\"); leave it out");
    if (l.key == "run.out_dir" && section == "[grid]")
      throw UserError(head + "the runs of a sweep share one directory, <run.out_dir>/<name>; set run.out_dir in "
                      "[set] or the experiment instead");
  }

  GridAxis axis(const Leaf& l) const {
    check_not_reserved("[grid]", l);
    const auto* list = l.node->as_array();
    if (!list)
      throw UserError(at(*l.node) + ": [grid] " + l.key + " is a single value; grid values are lists, such as "
                      "[1e-3, 3e-3] (a value every run shares goes in [set])");
    if (list->empty())
      throw UserError(at(*l.node) + ": [grid] " + l.key + " is an empty list; give it at least one value");
    GridAxis a{l.key, l.key.substr(l.key.rfind('.') + 1), {}};
    for (const toml::node& n : *list) {
      GridValue v = value(l.key, n);
      if (v.toml.empty())
        throw UserError(at(n) + ": [grid] " + l.key + ": the values must be numbers, strings or booleans, not " +
                        kind_of(n));
      for (const GridValue& seen : a.values) {
        if (seen.text != v.text) continue;
        if (seen.toml == v.toml)
          throw UserError(v.where + ": [grid] " + l.key + " lists " + v.text + " twice (also at " + seen.where +
                          "); each value is one run, so list it once");
        // Different values, one name: a run directory would hold two runs.
        throw UserError(v.where + ": [grid] " + l.key + " values " + seen.toml + " (at " + seen.where + ") and " +
                        v.toml + " give runs the same name part '" + a.label + "=" + v.text +
                        "' (run names keep letters, digits and . _ + -, other characters become '_'; 1 and 1.0 "
                        "both read 1): list one of them, or values whose names differ");
      }
      a.values.push_back(std::move(v));
    }
    return a;
  }

  GridValue fixed(const Leaf& l) const {
    check_not_reserved("[set]", l);
    GridValue v = value(l.key, *l.node);
    if (v.toml.empty())
      throw UserError(at(*l.node) + ": [set] " + l.key + " must be one number, string or boolean, not " +
                      kind_of(*l.node) + " (lists of values go in [grid])");
    return v;
  }

 private:
  std::string path_;
};

const toml::table& section(const toml::table& root, const std::string& name, const std::string& path) {
  const toml::node* n = root.get(name);
  if (n && !n->is_table())
    throw UserError(path + ": '" + name + "' must be a table, written [" + name + "] with keys inside");
  static const toml::table empty;
  return n ? *n->as_table() : empty;
}

}  // namespace

Grid load_grid(const std::string& path) {
  const std::string text =
      read_file(path, "cannot open the grid file (check the path; configs/sweeps/lr_x_balance.toml is an example)");
  toml::table root;
  try {
    root = toml::parse(std::string_view{text}, std::string_view{path});
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw UserError(path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                    ": TOML syntax error: " + std::string(e.description()));
  }
  GridReader r(path);
  Grid g;
  g.path = path;
  for (auto&& [k, v] : root)
    if (k.str() != "experiment" && k.str() != "name" && k.str() != "grid" && k.str() != "set")
      throw UserError(r.at(k.source()) + ": unknown key '" + std::string(k.str()) +
                      "'; a grid file holds experiment = \"...\", "
                      "name = \"...\", [grid] (lists of values per config key) and [set] (values every run shares)");

  const toml::node* exp = root.get("experiment");
  if (!exp)
    throw UserError(path + ": no experiment; name the experiment file the grid varies, such as experiment = "
                    "\"configs/tiny.toml\"");
  if (!exp->is_string() || exp->as_string()->get().empty())
    throw UserError(r.at(*exp) + ": experiment must be the path of an experiment file, such as \"configs/tiny.toml\"");
  g.experiment = exp->as_string()->get();
  g.experiment_where = r.at(*exp);

  g.name = std::filesystem::path(path).stem().string();
  if (const toml::node* name = root.get("name")) {
    const auto* s = name->as_string();
    if (!s || s->get().find_first_not_of('.') == std::string::npos || s->get() != filesystem_safe(s->get()))
      throw UserError(r.at(*name) + ": name must be a directory name of letters, digits and . _ + -, such as "
                      "\"lr_x_balance\"");
    g.name = s->get();
  }

  std::vector<Leaf> axes, sets;
  collect_leaves(section(root, "grid", path), "", axes);
  collect_leaves(section(root, "set", path), "", sets);
  sort_by_position(axes);
  sort_by_position(sets);
  if (axes.empty())
    throw UserError(path + ": no [grid] values; list values per config key, such as [grid] \"optimizer.lr\" = "
                    "[1e-3, 3e-3] (`moetrain keys` lists the keys)");
  for (const Leaf& l : axes) {
    for (const GridAxis& a : g.axes)
      if (a.key == l.key)
        throw UserError(r.at(*l.node) + ": [grid] " + l.key + " is listed twice (also at " + a.values[0].where + ")");
    g.axes.push_back(r.axis(l));
  }
  for (const Leaf& l : sets) {
    for (const GridAxis& a : g.axes)
      if (a.key == l.key)
        throw UserError(r.at(*l.node) + ": [set] " + l.key + " is also in [grid] (at " + a.values[0].where +
                        "); keep it in one of them");
    g.fixed.push_back(r.fixed(l));
  }
  // Labels are the keys' last parts unless two axes share one.
  for (GridAxis& a : g.axes)
    for (const GridAxis& b : g.axes)
      if (&a != &b && a.label == b.key.substr(b.key.rfind('.') + 1)) a.label = a.key;
  return g;
}

std::vector<GridRun> grid_runs(const Grid& g) {
  std::vector<GridRun> runs(1);
  for (const GridAxis& a : g.axes) {
    std::vector<GridRun> next;
    for (const GridRun& r : runs)
      for (const GridValue& v : a.values) {
        GridRun n = r;
        const std::string part = a.label + "=" + v.text;
        n.name += (n.name.empty() ? "" : ",") + part;
        n.labels += (n.labels.empty() ? "" : " ") + part;
        n.values.push_back(&v);
        next.push_back(std::move(n));
      }
    runs = std::move(next);
  }
  for (const GridRun& r : runs)
    if (r.name.size() > kMaxRunName)
      throw UserError(g.path + ": the run name '" + r.name + "' is longer than " + std::to_string(kMaxRunName) +
                      " characters, too long for a directory; vary fewer keys or use shorter values");
  return runs;
}

std::vector<std::string> run_overrides(const Grid& g, const GridRun& run, const std::string& sweep_dir) {
  std::vector<std::string> sets;
  for (const GridValue& v : g.fixed) sets.push_back(v.key + "=" + v.toml);
  for (const GridValue* v : run.values) sets.push_back(v->key + "=" + v->toml);
  sets.push_back("run.name=" + quoted(run.name));
  sets.push_back("run.out_dir=" + quoted(sweep_dir));
  sets.push_back("checkpoint.resume=\"auto\"");
  return sets;
}

}  // namespace mt
