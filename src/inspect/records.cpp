#include "inspect/records.hpp"

#include <cmath>
#include <set>

#include "util/escape.hpp"

namespace mt {

Cell number_cell(double x) { return {json_number(x), std::isnan(x) ? "" : shortest_number(x)}; }

Cell integer_cell(long long x) { return {std::to_string(x), std::to_string(x)}; }

Cell text_cell(const std::string& s) { return {json_string(s), s}; }

Cell bool_cell(bool b) { return {b ? "true" : "false", b ? "true" : "false"}; }

namespace {
template <class T, class F>
Cell list_cell(const std::vector<T>& xs, F one) {
  Cell c{"[", ""};
  for (size_t i = 0; i < xs.size(); ++i) {
    const Cell item = one(xs[i]);
    c.json += (i ? ", " : "") + item.json;
    c.csv += (i ? " " : "") + item.csv;
  }
  c.json += "]";
  return c;
}
}  // namespace

Cell numbers_cell(const std::vector<double>& xs) { return list_cell(xs, number_cell); }
Cell integers_cell(const std::vector<long long>& xs) { return list_cell(xs, integer_cell); }
Cell texts_cell(const std::vector<std::string>& xs) { return list_cell(xs, text_cell); }

Cell config_cell(const ConfigValue& v) {
  switch (v.kind) {
    case ConfigValue::Kind::integer: return {v.text, v.text};
    case ConfigValue::Kind::floating: return number_cell(v.number);
    case ConfigValue::Kind::boolean: return bool_cell(v.text == "true");
    default: return text_cell(v.text);
  }
}

std::string records_json(const std::vector<Record>& records) {
  std::string out = "[";
  for (size_t r = 0; r < records.size(); ++r) {
    out += r ? ",\n  {" : "\n  {";
    bool first = true;
    for (const auto& [name, cell] : records[r].fields) {
      out += (first ? "" : ", ") + json_string(name) + ": " + cell.json;
      first = false;
    }
    if (records[r].config) {
      out += std::string(first ? "" : ", ") + "\"config\": {";
      bool first_key = true;
      for (const auto& [key, value] : *records[r].config) {
        out += (first_key ? "" : ", ") + json_string(key) + ": " + config_cell(value).json;
        first_key = false;
      }
      out += "}";
    }
    out += "}";
  }
  return out + (records.empty() ? "]\n" : "\n]\n");
}

std::string records_csv(const std::vector<Record>& records) {
  std::set<std::string> keys;
  for (const Record& r : records)
    if (r.config)
      for (const auto& [key, value] : *r.config) keys.insert(key);
  std::string out;
  auto row = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      out += csv_field(cells[i]);
    }
    out += "\n";
  };
  std::vector<std::string> header;
  if (!records.empty())
    for (const auto& [name, cell] : records.front().fields) header.push_back(name);
  header.insert(header.end(), keys.begin(), keys.end());
  row(header);
  for (const Record& r : records) {
    std::vector<std::string> cells;
    for (const auto& [name, cell] : r.fields) cells.push_back(cell.csv);
    for (const std::string& key : keys) {
      std::string cell;
      if (r.config)
        if (const auto it = r.config->find(key); it != r.config->end()) cell = config_cell(it->second).csv;
      cells.push_back(cell);
    }
    row(cells);
  }
  return out;
}

}  // namespace mt
