#include "sweep/sweep.hpp"

#include <cstdio>

#include "config/config.hpp"
#include "io/checkpoint.hpp"
#include "sweep/child_process.hpp"
#include "sweep/grid.hpp"
#include "sweep/sweep_table.hpp"
#include "util/error.hpp"

namespace mt {

namespace {

// load_config with a run's overrides. Its errors name an override as "--set key=value"; they
// point into the grid file instead, and name the run whose combination of values is at fault.
Config load_in_grid(const Grid& g, const GridRun* run, const std::vector<std::string>& sets) {
  try {
    return load_config(g.experiment, sets);
  } catch (const UserError& e) {
    std::string m = e.what();
    auto point = [&](const GridValue& v, const char* section) {
      const std::string from = "--set " + v.key + "=" + v.toml;
      const std::string to = v.where + " (" + section + " " + v.key + " = " + v.toml + ")";
      for (size_t at; (at = m.find(from)) != std::string::npos;) m.replace(at, from.size(), to);
    };
    for (const GridValue& v : g.fixed) point(v, "[set]");
    if (run)
      for (const GridValue* v : run->values) point(*v, "[grid]");
    if (m.rfind(g.path, 0) != 0)
      m = (run ? g.path + ": run " + run->name : g.experiment_where) + ": " + m;
    throw UserError(m);
  }
}

struct PlannedRun {
  const GridRun* run;
  std::vector<std::string> train_args;  // train EXPERIMENT --set ...
  std::string dir;
  long long steps = 0;
  bool final_checkpoint = true;  // checkpoint.final: a finished run leaves a checkpoint of its last step
};

long long checkpointed_step(const std::string& run_dir) {
  const std::vector<std::string> all = complete_checkpoints(run_dir);
  return all.empty() ? 0 : checkpoint_step(all.front());
}

}  // namespace

int run_sweep(const std::string& grid_path) {
  const Grid g = load_grid(grid_path);
  const std::vector<GridRun> runs = grid_runs(g);
  std::vector<std::string> fixed;
  for (const GridValue& v : g.fixed) fixed.push_back(v.key + "=" + v.toml);
  const std::string sweep_dir = load_in_grid(g, nullptr, fixed).run.out_dir + "/" + g.name;

  // Every run's config is checked first, so a mistake stops the sweep before any training.
  std::vector<PlannedRun> plan;
  for (const GridRun& r : runs) {
    const std::vector<std::string> sets = run_overrides(g, r, sweep_dir);
    const Config cfg = load_in_grid(g, &r, sets);
    const auto& p = cfg.parallel;
    if (p.dp * p.tp * p.pp != 1)
      throw UserError(g.path + ": run " + r.name + ": parallel.dp * tp * pp = " + std::to_string(p.dp * p.tp * p.pp) +
                      " ranks, but a sweep trains each run as one process; train layouts of several ranks with "
                      "mpirun moetrain train");
    PlannedRun planned{&r, {"train", g.experiment}, sweep_dir + "/" + r.name, cfg.training.steps, cfg.checkpoint.final};
    for (const std::string& s : sets) planned.train_args.insert(planned.train_args.end(), {"--set", s});
    plan.push_back(std::move(planned));
  }

  std::string axes;
  for (const GridAxis& a : g.axes) axes += (axes.empty() ? "" : " x ") + a.key;
  std::printf("sweep %s: %zu runs of %s (%s) in %s\n", g.name.c_str(), plan.size(), g.experiment.c_str(), axes.c_str(),
              sweep_dir.c_str());
  std::vector<SweepRow> rows;
  int complete = 0, failed = 0;
  bool stopped = false;
  ChildRunner runner;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRun& p = plan[i];
    SweepRow row{{}, p.dir, "not started"};
    for (const GridValue* v : p.run->values) row.values.push_back(v->text);
    const std::string head =
        "[" + std::to_string(i + 1) + "/" + std::to_string(plan.size()) + "] " + p.run->labels + ": ";
    // After a stop request the remaining runs stay "not started"; the same command trains them.
    stopped = stopped || runner.stop_requested();
    if (stopped) {
      rows.push_back(std::move(row));
      continue;
    }
    const long long before = checkpointed_step(p.dir);
    if (before >= p.steps) {
      std::printf("%sskipped (complete)\n", head.c_str());
      row.status = "complete";
      ++complete;
    } else {
      std::printf("%s%s\n", head.c_str(),
                  before > 0 ? ("resumed from step " + std::to_string(before)).c_str() : "running");
      const ChildResult res = runner.run(p.train_args);
      const long long after = checkpointed_step(p.dir);
      // Without a final checkpoint, training's exit status alone says that it reached the last step.
      if (res.exit_code == 0 && (after >= p.steps || !p.final_checkpoint)) {
        row.status = "complete";
        ++complete;
      } else if (runner.stop_requested()) {
        stopped = true;
        row.status = "interrupted at step " + std::to_string(after);
      } else {
        row.status = res.signal ? "failed (signal " + std::to_string(res.signal) + ")"
                                : "failed (exit " + std::to_string(res.exit_code) + ")";
        ++failed;
      }
      std::printf("%s%s\n", head.c_str(), row.status.c_str());
    }
    rows.push_back(std::move(row));
  }

  std::vector<std::string> labels;
  for (const GridAxis& a : g.axes) labels.push_back(a.label);
  std::printf("\n%s", sweep_table(labels, rows).c_str());
  std::printf("sweep %s: %d of %zu runs complete%s%s\n", g.name.c_str(), complete, plan.size(),
              failed ? (", " + std::to_string(failed) + " failed").c_str() : "",
              stopped ? "; stopped by a signal: the same command resumes the sweep" : "");
  return stopped ? 130 : failed ? 1 : 0;
}

}  // namespace mt
