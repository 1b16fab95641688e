#include "plot/plot.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>

#include "plot/charts.hpp"
#include "plot/smooth.hpp"
#include "util/error.hpp"

namespace mt::plot {

namespace fs = std::filesystem;

namespace {

// Legend names: the run directory's last component, or the whole path where two runs share it.
std::vector<std::string> run_names(const std::vector<std::string>& dirs) {
  std::vector<std::string> names;
  std::map<std::string, int> count;
  for (const std::string& d : dirs) {
    // Absolute, so "." and "runs/tiny/" are named by the directory itself.
    const fs::path p = fs::absolute(d).lexically_normal();
    std::string name = p.filename().string();
    if (name.empty()) name = p.parent_path().filename().string();
    names.push_back(name.empty() ? d : name);
    ++count[names.back()];
  }
  for (size_t i = 0; i < dirs.size(); ++i)
    if (count[names[i]] > 1) names[i] = dirs[i];
  return names;
}

void make_out_dir(const std::string& out) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out))
    throw UserError("--out " + out + ": cannot create the directory (" +
                    (ec ? ec.message() : std::string("a file of that name exists")) + "); give a writable directory");
}

void write_file(const std::string& out, const Chart& c) {
  const std::string path = (fs::path(out) / c.file).string();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f)
    throw UserError("--out " + out + ": cannot write " + c.file + " (" + std::strerror(errno) +
                    "); give a writable directory");
  bool ok = std::fwrite(c.svg.data(), 1, c.svg.size(), f) == c.svg.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw UserError(path + ": writing failed (disk full?)");
}

// A folder without a log.h5 whose subfolders hold runs (a sweep's, or run.out_dir) stands for those
// runs; anything else is left for load_run to read or refuse.
std::vector<std::string> with_folders_expanded(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    std::error_code ec;
    const std::vector<std::string> inside =
        fs::exists(fs::path(d) / "log.h5", ec) ? std::vector<std::string>{} : runs_in_folder(d);
    if (inside.empty()) out.push_back(d);
    out.insert(out.end(), inside.begin(), inside.end());
  }
  return out;
}

}  // namespace

PlotResult plot_runs(const std::vector<std::string>& requested_dirs, const std::string& out_dir, bool log_steps,
                     long long smooth_window) {
  PlotResult result;
  const std::vector<std::string> run_dirs = with_folders_expanded(requested_dirs);
  const std::vector<std::string> names = run_names(run_dirs);
  std::vector<Run> runs;
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    RunData data = load_run(run_dirs[i]);
    if (data.steps.empty()) {
      result.notes.push_back("left out " + run_dirs[i] + ": its log.h5 holds no step yet");
      continue;
    }
    runs.push_back({names[i], std::move(data)});
  }
  if (runs.empty())
    throw UserError("nothing to plot: no step is logged yet in " + run_dirs.front() + "/log.h5" +
                    (run_dirs.size() > 1 ? " or the other runs" : "") +
                    " (plot again once training has logged a step)");
  make_out_dir(out_dir);
  long long longest = 0;
  for (const Run& r : runs) longest = std::max(longest, r.data.steps.back());
  const long long window = smooth_window < 0 ? default_smoothing_window(longest) : smooth_window;
  const std::vector<Chart> charts = {
      loss_chart(runs, log_steps, window),
      scalar_chart(runs, "lr", "Learning rate", "learning rate", 0, log_steps),
      scalar_chart(runs, "grad_norm", "Gradient norm", "global gradient norm (before clipping)", window, log_steps,
                   true),
      scalar_chart(runs, "tokens_per_s", "Training throughput", "tokens per second", window, log_steps),
      expert_load_chart(runs),
      expert_bias_chart(runs, log_steps),
      phases_chart(runs),
  };
  for (const Chart& c : charts) {
    if (c.svg.empty()) {
      result.notes.push_back("skipped " + c.file + ": " + c.skipped);
      continue;
    }
    write_file(out_dir, c);
    result.written.push_back((fs::path(out_dir) / c.file).string());
  }
  return result;
}

}  // namespace mt::plot
