#include "inspect/inspect.hpp"

#include <algorithm>
#include <filesystem>

#include "inspect/checkpoint_summary.hpp"
#include "inspect/compare_table.hpp"
#include "inspect/report_text.hpp"
#include "inspect/run_data.hpp"
#include "inspect/run_summary.hpp"
#include "inspect/summary_records.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace mt {

namespace {

enum class Kind { run, checkpoint, neither };

Kind kind_of_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "log.h5", ec)) return Kind::run;
  if (fs::exists(dir / "manifest.toml", ec) || fs::exists(dir / "rank_00000.h5", ec)) return Kind::checkpoint;
  return Kind::neither;
}

// A few runs or checkpoints inside dir, for the error message when dir is neither.
std::string inner_examples(const fs::path& dir) {
  std::string out;
  int found = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(ec) || kind_of_dir(e.path()) == Kind::neither) continue;
    if (found == 3) return out + ", ...";
    out += (found++ ? ", " : "") + e.path().string();
  }
  return out;
}

struct Target {
  std::string dir;
  Kind kind;
};

// The runs directly inside dir (a sweep's folder, or run.out_dir), by name; empty when there are none.
std::vector<Target> runs_inside(const fs::path& dir) {
  std::vector<Target> out;
  for (const std::string& run : runs_in_folder(dir.string())) out.push_back({run, Kind::run});
  return out;
}

// A run, a checkpoint, or a folder of runs (each of its runs).
std::vector<Target> classify(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const fs::path p(path);
  std::error_code ec;
  const std::string expected =
      "give a run directory (it holds log.h5, e.g. runs/tiny) or a checkpoint directory (it holds manifest.toml "
      "and rank_*.h5, e.g. runs/tiny/ckpt/step_00000300)";
  if (!fs::exists(p, ec)) throw UserError(path + ": no such file or directory; " + expected);
  if (fs::is_regular_file(p, ec)) {
    const std::string name = p.filename().string();
    const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
    if (name == "log.h5") return {{parent, Kind::run}};
    if (name.rfind("rank_", 0) == 0 && p.extension() == ".h5") return {{parent, Kind::checkpoint}};
    throw UserError(path + ": a file, but neither a run's log.h5 nor a checkpoint's rank_*.h5; " + expected);
  }
  const Kind kind = kind_of_dir(p);
  if (kind != Kind::neither) return {{path, kind}};
  if (std::vector<Target> runs = runs_inside(p); !runs.empty()) return runs;
  const std::string inner = inner_examples(p);
  throw UserError(path + ": neither a run nor a checkpoint directory (no log.h5, manifest.toml or rank_00000.h5 in "
                  "it) nor a folder of runs such as a sweep's; " + expected +
                  (inner.empty() ? "" : "; inside it: " + inner));
}

std::string runs_report(const std::vector<Target>& targets, const InspectOptions& o) {
  std::vector<RunSummary> runs;
  for (const Target& t : targets) runs.push_back(summarize_run(t.dir, o.window));
  if (o.json || o.csv) {
    std::vector<Record> records;
    for (const RunSummary& r : runs) records.push_back(run_record(r));
    return o.json ? records_json(records) : records_csv(records);
  }
  return runs.size() == 1 ? run_text(runs.front()) : comparison_table(runs);
}

std::string checkpoints_report(const std::vector<Target>& targets, const InspectOptions& o) {
  std::vector<CheckpointSummary> checkpoints;
  for (const Target& t : targets) checkpoints.push_back(summarize_checkpoint(t.dir));
  if (o.json || o.csv) {
    std::vector<Record> records;
    for (const CheckpointSummary& c : checkpoints) records.push_back(checkpoint_record(c));
    return o.json ? records_json(records) : records_csv(records);
  }
  std::string out;
  for (const CheckpointSummary& c : checkpoints) {
    if (!out.empty()) out += '\n';
    out += checkpoint_text(c);
  }
  return out;
}

}  // namespace

std::string inspect(const std::vector<std::string>& paths, const InspectOptions& options) {
  if (paths.empty()) throw UserError("inspect: give at least one run or checkpoint directory");
  if (options.window < 1) throw UserError("inspect: --window must be at least 1 step");
  std::vector<Target> targets;
  for (const std::string& p : paths)
    for (Target& t : classify(p)) targets.push_back(std::move(t));
  for (const Target& t : targets)
    if (t.kind != targets.front().kind)
      throw UserError("inspect: " + targets.front().dir + " is a " +
                      (targets.front().kind == Kind::run ? "run" : "checkpoint") + " but " + t.dir + " is a " +
                      (t.kind == Kind::run ? "run" : "checkpoint") +
                      "; give only runs (to compare them) or only checkpoints");
  return targets.front().kind == Kind::run ? runs_report(targets, options) : checkpoints_report(targets, options);
}

}  // namespace mt
