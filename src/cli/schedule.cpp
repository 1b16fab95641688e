// `moetrain schedule`: a pipeline schedule generated, checked, simulated, and printed or drawn.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "pipeline/check.hpp"
#include "pipeline/draw_svg.hpp"
#include "pipeline/generators.hpp"
#include "pipeline/report.hpp"
#include "util/cli_checks.hpp"
#include "util/error.hpp"

namespace mt::cli {

namespace {

struct ScheduleArgs {
  std::string kind;
  int pp = 0, microbatches = 0, vpp = 1;
  bool json = false;
  std::string svg;
  mt::pipeline::Costs costs;
};

// The simulated timeline `tl` of `s` drawn to --svg.
void write_svg(const ScheduleArgs& o, const mt::pipeline::Schedule& s, const mt::pipeline::Timeline& tl) {
  std::FILE* f = std::fopen(o.svg.c_str(), "w");
  if (!f) throw mt::UserError("schedule: cannot write --svg " + o.svg + ": check that the directory exists");
  char title[160];
  std::snprintf(title, sizeof title, "%s, pp=%d, %d micro-batches: bubble %g per rank (max), makespan %g",
                o.kind.c_str(), o.pp, o.microbatches, tl.max_bubble(), tl.makespan);
  std::string svg = timeline_svg(s, tl, title);
  bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw mt::UserError("schedule: writing --svg " + o.svg + " failed (disk full?)");
  if (!o.json) std::printf("wrote %s\n", o.svg.c_str());
}

int run_schedule(const ScheduleArgs& o) {
  using namespace mt::pipeline;
  const Costs& c = o.costs;
  for (double v : {c.forward, c.backward, c.input_grad, c.weight_grad, c.overlapped, c.latency})
    if (!(v >= 0) || std::isinf(v))
      throw mt::UserError("schedule: costs and latency must be non-negative finite numbers");
  // The timeline holds a pass per stage chunk and micro-batch: beyond this it would take minutes.
  const long long passes = (long long)o.pp * o.vpp * o.microbatches;
  if (passes > (1 << 18))
    throw mt::UserError("schedule: --pp * --vpp * --microbatches = " + std::to_string(passes) +
                        " chunk passes is out of range (at most 262144)");
  Schedule s = make_schedule({parse_kind(o.kind), o.pp, o.microbatches, o.vpp});
  if (auto problems = check_schedule(s); !problems.empty()) {
    std::fprintf(stderr, "moetrain internal error: the generated %s schedule fails its check (a bug in moetrain):\n",
                 o.kind.c_str());
    for (const auto& p : problems) std::fprintf(stderr, "  %s\n", p.c_str());
    return 3;
  }
  Timeline tl = simulate(s, c);
  std::fputs((o.json ? schedule_json(s, tl, c) : schedule_text(s, tl, c)).c_str(), stdout);
  if (!o.svg.empty()) write_svg(o, s, tl);
  return 0;
}

}  // namespace

Command add_schedule(CLI::App& app) {
  auto o = std::make_shared<ScheduleArgs>();
  CLI::App* schedule = app.add_subcommand("schedule",
      "Generate a pipeline schedule, check it, simulate its timeline and print (or draw) it");
  schedule->add_option("--kind", o->kind, "gpipe, 1f1b, interleaved, zb-h1, dualpipe or dualpipev")->required();
  schedule->add_option("--pp", o->pp, "pipeline ranks")->required()->check(mt::whole_in(1, 1024));
  schedule->add_option("--microbatches", o->microbatches,
                       "micro-batches per step (DualPipe: both directions together)")
      ->required()
      ->check(mt::whole_in(1, 1 << 16));
  schedule->add_option("--vpp", o->vpp, "chunks per rank, interleaved only")->check(mt::whole_in(1, 1024));
  schedule->add_flag("--json", o->json, "print {kind, pp, microbatches, ranks, ...} as JSON");
  schedule->add_option("--svg", o->svg, "draw the simulated timeline to this SVG file");
  schedule->add_option("--cost-f", o->costs.forward, "time of a forward chunk (default 1)");
  schedule->add_option("--cost-b", o->costs.backward, "time of a full backward chunk (default 2)");
  schedule->add_option("--cost-i", o->costs.input_grad,
                       "time of the input-gradient half of a backward (default 1)");
  schedule->add_option("--cost-w", o->costs.weight_grad,
                       "time of the weight-gradient half of a backward (default 1)");
  schedule->add_option("--cost-fb", o->costs.overlapped, "time of an overlapped F&B pair (default 3)");
  schedule->add_option("--latency", o->costs.latency, "time of one point-to-point transfer (default 0)");
  return {schedule, [o] { return run_schedule(*o); }};
}

}  // namespace mt::cli
