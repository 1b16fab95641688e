#pragma once
// `inspect --json` and `--csv`: records of named fields plus the run's whole config, written as a
// JSON array of objects or as CSV with a header row. Both carry the same fields.
#include <string>
#include <utility>
#include <vector>

#include "inspect/flat_config.hpp"

namespace mt {

// One value in both encodings. Lists are JSON arrays and space-separated CSV cells; missing
// numbers (NaN) are JSON null and empty CSV cells.
struct Cell {
  std::string json, csv;
};
Cell number_cell(double x);
Cell integer_cell(long long x);
Cell text_cell(const std::string& s);
Cell bool_cell(bool b);
Cell numbers_cell(const std::vector<double>& xs);
Cell integers_cell(const std::vector<long long>& xs);
Cell texts_cell(const std::vector<std::string>& xs);
Cell config_cell(const ConfigValue& v);

struct Record {
  std::vector<std::pair<std::string, Cell>> fields;  // every record of one output has the same names
  const FlatConfig* config = nullptr;  // JSON: "config": {"optimizer.lr": 0.003, ...}; CSV: a column per key
};

std::string records_json(const std::vector<Record>& records);
// Columns: the fields, then every config key any record has (a cell stays empty where one lacks it).
std::string records_csv(const std::vector<Record>& records);

}  // namespace mt
