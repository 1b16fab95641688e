#include "sweep/sweep_table.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "inspect/run_data.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

std::string fixed(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Steps, loss, eval loss and tokens/s of a run's log; dashes where it has none.
std::vector<std::string> logged(const std::string& dir) {
  std::vector<std::string> cells(4, "-");
  if (!std::filesystem::exists(dir + "/log.h5")) return cells;
  RunData run;
  try {
    run = load_run(dir);
  } catch (const UserError&) {
    return cells;  // damaged: the status column says what happened to the run
  }
  if (run.steps.empty()) return cells;
  cells[0] = std::to_string(run.steps.back());
  cells[1] = fixed("%.4f", run.scalar("loss").back());
  if (!run.eval_loss.empty()) cells[2] = fixed("%.4f", run.eval_loss.back());
  // The median after the first step, which carries the start-up cost.
  std::vector<double> speed = run.scalar("tokens_per_s");
  if (speed.size() > 1) speed.erase(speed.begin());
  std::nth_element(speed.begin(), speed.begin() + speed.size() / 2, speed.end());
  cells[3] = fixed("%.0f", speed[speed.size() / 2]);
  return cells;
}

}  // namespace

std::string sweep_table(const std::vector<std::string>& labels, const std::vector<SweepRow>& rows) {
  std::vector<std::vector<std::string>> cells{labels};
  for (const char* h : {"steps", "loss", "eval_loss", "tok/s", "status"}) cells[0].push_back(h);
  for (const SweepRow& r : rows) {
    std::vector<std::string> row = r.values;
    for (std::string& c : logged(r.dir)) row.push_back(std::move(c));
    row.push_back(r.status);
    cells.push_back(std::move(row));
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c)
      line += row[c] + (c + 1 < row.size() ? std::string(width[c] - row[c].size() + 2, ' ') : "");
    out += line + "\n";
  }
  return out;
}

}  // namespace mt
