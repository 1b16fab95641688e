// Experiment file -> Config: parse, apply --set overrides, reject unknown keys, read every
// field with its range check, then the rules that tie fields together.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "config/schema.hpp"
#include "config/validate.hpp"
#include "util/error.hpp"
#include "util/read_file.hpp"

namespace mt {

namespace {

// "file:line:col" for nodes from the file, "--set k=v" for nodes from an override.
std::string where(const toml::source_region& src, const std::string& fallback) {
  if (!src.path) return fallback;
  const std::string& p = *src.path;
  if (p.rfind("--set", 0) == 0) return p;
  return p + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(const std::string& key, const std::vector<Field>& fields) {
  std::string best;
  size_t best_d = 4;
  for (auto& f : fields) {
    size_t d = edit_distance(key, f.key);
    if (d < best_d) { best_d = d; best = f.key; }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

// training.eval_batches counted micro-batches, so the validation set changed with micro_batch;
// eval_sequences counts sequences. The same count as before is eval_batches * micro_batch.
std::string eval_batches_replaced(const toml::table& root, const toml::node& value) {
  const auto batches = value.value_exact<int64_t>();
  const int64_t micro = root["training"]["micro_batch"].value_or(int64_t(TrainingConfig{}.micro_batch));
  const std::string same = batches ? "training.eval_sequences = " + std::to_string(*batches * micro) + " (" +
                                         std::to_string(*batches) + " * training.micro_batch " +
                                         std::to_string(micro) + ")"
                                   : "training.eval_sequences = eval_batches * training.micro_batch";
  return "training.eval_batches is no longer a key: validation now reads a fixed number of sequences, whatever the "
         "micro-batch size; write " + same + " for as many validation sequences as before";
}

std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// toml++ recurses once per part of a dotted key, and so do its tables' destructors and
// collect_leaves: a key of 100,000 parts overflows the stack. moetrain's keys have three at most.
constexpr size_t kMaxKeyParts = 64;

// The parts of the key a line of TOML starts with ("[a.b]" or "a.b = ..."); dots between digits
// are a number's.
size_t key_parts(std::string_view line) {
  const size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return 0;
  const size_t end = line.find(line[start] == '[' ? ']' : '=', start);
  if (line[start] != '[' && end == std::string_view::npos) return 0;
  const std::string_view key = line.substr(start, end - start);
  size_t parts = 1;
  for (size_t i = 0; i < key.size(); ++i)
    parts += key[i] == '.' && !(i > 0 && i + 1 < key.size() && std::isdigit((unsigned char)key[i - 1]) &&
                                std::isdigit((unsigned char)key[i + 1]));
  return parts;
}

void check_key_parts(std::string_view text, const std::string& source_name) {
  size_t line_no = 1;
  for (size_t start = 0; start <= text.size(); ++line_no) {
    const size_t nl = std::min(text.find('\n', start), text.size());
    if (key_parts(text.substr(start, nl - start)) > kMaxKeyParts)
      throw UserError(source_name + ":" + std::to_string(line_no) + ": a key of more than " +
                      std::to_string(kMaxKeyParts) + " dotted parts; moetrain's keys have at most three " +
                      "(e.g. model.attention.kind)");
    start = nl + 1;
  }
}

void apply_override(toml::table& root, const std::string& text) {
  const std::string origin = "--set " + text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError(origin + ": expected --set section.key=value (for example --set training.steps=100)");
  if (key_parts(text) > kMaxKeyParts)
    throw UserError(origin + ": a key of more than " + std::to_string(kMaxKeyParts) +
                    " dotted parts; moetrain's keys have at most three (e.g. model.attention.kind)");
  const std::string key = text.substr(0, eq), rhs = text.substr(eq + 1);
  toml::table parsed;
  try {
    parsed = toml::parse(std::string_view{"v = " + rhs}, std::string_view{origin});
  } catch (const toml::parse_error&) {
    // A bare word is taken as a string, so --set run.name=exp1 needs no shell quoting.
    try {
      parsed = toml::parse(std::string_view{"v = " + toml_quoted(rhs)}, std::string_view{origin});
    } catch (const toml::parse_error& e) {
      throw UserError(origin + ": the value is not a TOML value: " + std::string(e.description()));
    }
  }
  toml::table* t = &root;
  std::string rest = key;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
    const std::string part = rest.substr(0, dot);
    toml::node* child = t->get(part);
    if (!child) child = &t->insert_or_assign(part, toml::table{}).first->second;
    if (!child->is_table())
      throw UserError(origin + ": '" + part + "' in the key is a value, not a section");
    t = child->as_table();
  }
  t->insert_or_assign(rest, std::move(*parsed.get("v")));
}

// "key = value" as written on a line of the file (1-based), for a value TOML cannot read.
std::string key_on_line(const std::string& text, size_t line) {
  std::istringstream in(text);
  std::string l;
  for (size_t i = 0; i < line && std::getline(in, l); ++i) {}
  const size_t first = l.find_first_not_of(" \t"), hash = l.find('#');
  l = first == std::string::npos ? "" : l.substr(first, hash == std::string::npos ? std::string::npos : hash - first);
  return "'" + l.substr(0, l.find_last_not_of(" \t") + 1) + "'";
}

struct Leaf {
  std::string key;                  // dotted
  const toml::source_region* name;  // where the key is written
  const toml::node* value;
};

// Every leaf key of the document.
void collect_leaves(const toml::table& t, const std::string& prefix, std::vector<Leaf>& out) {
  for (auto&& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) collect_leaves(*v.as_table(), key, out);
    else out.push_back({key, &k.source(), &v});
  }
}

}  // namespace

Config parse_config(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
  check_key_parts(toml_text, source_name);
  toml::table root;
  try {
    root = toml::parse(std::string_view{toml_text}, std::string_view{source_name});
  } catch (const toml::parse_error& e) {
    if (std::string(e.description()).find("not representable in 64 bits") != std::string::npos)
      throw UserError(where(e.source(), source_name) + ": " + key_on_line(toml_text, e.source().begin.line) +
                      " is out of range: TOML integers are at most 9223372036854775807, and `moetrain keys` "
                      "gives each key's limit");
    throw UserError(where(e.source(), source_name) + ": TOML syntax error: " + std::string(e.description()));
  }
  for (auto& o : overrides) apply_override(root, o);

  Config cfg;
  cfg.source_path = source_name;
  std::vector<Field> fields = schema_fields(cfg);
  std::set<std::string> section_names;
  for (auto& f : fields)
    for (size_t dot = f.key.find('.'); dot != std::string::npos; dot = f.key.find('.', dot + 1))
      section_names.insert(f.key.substr(0, dot));

  std::vector<Leaf> leaves;
  collect_leaves(root, "", leaves);
  // Report problems in file order (TOML++ iterates keys sorted); overrides come after the file.
  auto rank = [](const Leaf& l) {
    const auto& src = l.value->source();
    const bool from_set = src.path && src.path->rfind("--set", 0) == 0;
    return std::tuple(from_set, src.begin.line, src.begin.column);
  };
  std::stable_sort(leaves.begin(), leaves.end(), [&](auto& a, auto& b) { return rank(a) < rank(b); });
  for (auto& [key, name, node] : leaves) {
    auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
    const std::string at = where(node->source(), source_name);
    if (it == fields.end()) {
      // --set keys have no place, and a --set that replaced a section keeps the file's key.
      const bool from_set = at.rfind("--set", 0) == 0;
      const std::string key_at = name->path && !from_set ? where(*name, source_name) : at;
      if (section_names.count(key))
        throw UserError(key_at + ": '" + key + "' is a section; " +
                        (from_set ? "set a key inside it, such as --set " + key + ".<key>=value"
                                  : "write it as [" + key + "] with keys inside"));
      if (key == "training.eval_batches") throw UserError(key_at + ": " + eval_batches_replaced(root, *node));
      throw UserError(key_at + ": unknown key '" + key + "'" + suggestion(key, fields) +
                      " (`moetrain keys` and docs/config.md list every key)");
    }
    std::string complaint = it->read(*node);
    if (!complaint.empty()) throw UserError(at + ": " + key + " " + complaint);
    cfg.origin[key] = at;
  }
  for (auto& f : fields)
    if (!cfg.origin.count(f.key)) cfg.origin[f.key] = source_name + " (default of " + f.key + ")";

  validate_config(cfg);

  toml::table resolved;
  for (auto& f : fields) {
    toml::table* t = &resolved;
    std::string rest = f.key;
    for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
      const std::string part = rest.substr(0, dot);
      if (!t->get(part)) t->insert_or_assign(part, toml::table{});
      t = t->get(part)->as_table();
    }
    f.write(*t, rest);
  }
  std::ostringstream s;
  s << resolved << "\n";
  cfg.resolved_toml = s.str();
  return cfg;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_file(path, "cannot open the experiment file "
                                      "(check the path; configs/tiny.toml is the demo)"),
                      path, overrides);
}

}  // namespace mt
