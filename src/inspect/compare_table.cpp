#include "inspect/compare_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mt {

namespace {

std::string fixed(double x, const char* fmt) {
  if (std::isnan(x)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

}  // namespace

std::string comparison_table(const std::vector<RunSummary>& runs) {
  std::vector<const FlatConfig*> configs;
  for (const RunSummary& r : runs) configs.push_back(&r.config);
  // The run column already names each run by its directory, which run.out_dir and run.name make.
  const std::vector<std::string> keys = differing_keys(configs, {"run.name", "run.out_dir"});

  std::vector<std::string> header{"run"};
  header.insert(header.end(), keys.begin(), keys.end());
  header.push_back("status");
  const size_t numbers_from = header.size();  // numbers are right-aligned
  for (const char* h : {"steps", "loss", "best val", "tok/s", "MFU"}) header.push_back(h);

  std::vector<std::vector<std::string>> rows{header};
  for (const RunSummary& r : runs) {
    std::vector<std::string> row{r.dir};
    for (const std::string& key : keys) row.push_back(config_text(r.config, key, "-"));
    const bool logged = r.rows > 0;
    row.push_back(r.status());
    row.push_back(std::to_string(r.steps_done) + "/" + std::to_string(r.steps_total));
    row.push_back(fixed(logged ? r.loss_smoothed : NAN, "%.4f"));
    row.push_back(fixed(r.has_eval ? r.val_best : NAN, "%.4f"));
    row.push_back(fixed(logged ? r.tokens_per_s : NAN, "%.0f"));
    row.push_back(logged && !std::isnan(r.mfu) ? fixed(100 * r.mfu, "%.1f%%") : "n/a");
    rows.push_back(row);
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += (c ? "  " : "") + (c < numbers_from ? row[c] + pad : pad + row[c]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  size_t window = 0;
  for (const RunSummary& r : runs) window = std::max(window, r.window);
  out += "\nloss: mean of the last " + std::to_string(window) +
         " logged steps (fewer in a shorter run); best val: lowest validation loss; tok/s and MFU: medians over the "
         "steps after the first\n";
  if (keys.empty()) out += "the runs' configs differ only in run.name and run.out_dir\n";
  return out;
}

}  // namespace mt
