// phases.svg: for each run of several ranks, one stacked bar per rank of the mean time per step
// in each phase. Pipeline wait (the measured bubble) stands out in red and is labelled.
#include <algorithm>
#include <cstdio>

#include "plot/chart.hpp"
#include "plot/charts.hpp"
#include "plot/legend.hpp"

namespace mt::plot {

namespace {

// Stacked bottom to top. "compute" in the log includes the tensor- and expert-parallel
// communication inside the layers, so the bar shows compute without it; "other" is the rest of
// the step (host work between phases).
struct Part {
  const char* name;
  const char* label;
  svg::Rgb colour;
};
const Part kParts[] = {{"compute", "compute (without communication)", {78, 121, 167}},
                       {"tp_comm", "tensor-parallel communication", {118, 183, 178}},
                       {"ep_comm", "expert-parallel communication", {89, 161, 79}},
                       {"pipeline_wait", "pipeline wait (bubble)", {225, 50, 50}},
                       {"grad_sync", "gradient sum", {237, 201, 72}},
                       {"optimizer", "optimizer", {176, 122, 161}},
                       {"other", "other", {200, 195, 190}}};
constexpr int kNumParts = 7, kWait = 3;
constexpr double kBar = 26, kBarGap = 10, kGroupGap = 46, kLeft = 80;

// Seconds per step of each part on one rank, averaged over the steps after the first, whose
// one-time setup (allocation, connections) would dominate short runs.
std::vector<double> rank_parts(const RunData& r, int rank) {
  auto index = [&](const std::string& name) {
    auto it = std::find(r.phase_names.begin(), r.phase_names.end(), name);
    return it == r.phase_names.end() ? -1 : int(it - r.phase_names.begin());
  };
  const size_t first = r.steps.size() > 1 ? 1 : 0;
  auto mean = [&](const std::string& name) {
    const int p = index(name);
    if (p < 0) return 0.0;
    double sum = 0;
    for (size_t s = first; s < r.steps.size(); ++s) sum += r.phase(s, rank, p);
    return sum / double(r.steps.size() - first);
  };
  std::vector<double> v(kNumParts);
  for (int i = 1; i < kNumParts - 1; ++i) v[i] = mean(kParts[i].name);
  v[0] = std::max(0.0, mean("compute") - v[1] - v[2]);
  double sum = 0;
  for (int i = 0; i < kNumParts - 1; ++i) sum += v[i];
  v[kNumParts - 1] = std::max(0.0, mean("step") - sum);
  return v;
}

std::string percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

}  // namespace

Chart phases_chart(const std::vector<Run>& runs) {
  std::vector<const Run*> shown;
  for (const Run& run : runs)
    if (run.data.ranks > 1 && !run.data.steps.empty()) shown.push_back(&run);
  if (shown.empty())
    return {"phases.svg", "", "every run has one rank (per-rank phases need a run under mpirun -np 2 or more)"};
  std::vector<std::vector<std::vector<double>>> parts;  // [run][rank][part]
  double top = 0;
  bool used[kNumParts] = {};
  for (const Run* run : shown) {
    parts.emplace_back();
    for (int k = 0; k < run->data.ranks; ++k) {
      parts.back().push_back(rank_parts(run->data, k));
      double total = 0;
      for (int i = 0; i < kNumParts; ++i)
        total += parts.back().back()[i], used[i] = used[i] || parts.back().back()[i] > 0;
      top = std::max(top, total);
    }
  }
  const bool ms = top < 1;  // short steps read better in milliseconds
  const double unit = ms ? 1e3 : 1;
  double width = kLeft;
  for (const Run* run : shown) width += run->data.ranks * (kBar + kBarGap) - kBarGap + kGroupGap;
  const Box area{kLeft, kPageTop + 30, std::max(width - kLeft, 300.0), 380};
  const Axis y(0, top * unit * 1.08, area.y + area.h, area.y, false);
  std::string body = y_axis_marks(y, area, ms ? "mean time per step (ms)" : "mean time per step (s)");
  body += svg::line(area.x, area.y + area.h, area.x + area.w, area.y + area.h, "#333", 1);
  double x = area.x + kGroupGap / 2;
  for (size_t g = 0; g < shown.size(); ++g) {
    const double group_left = x;
    for (int k = 0; k < shown[g]->data.ranks; ++k) {
      const std::vector<double>& v = parts[g][k];
      double base = 0, total = 0;
      for (double t : v) total += t;
      for (int i = 0; i < kNumParts; ++i) {
        if (v[i] <= 0) continue;
        const double y0 = y.map((base + v[i]) * unit), y1 = y.map(base * unit);
        body += svg::rect(x, y0, kBar, y1 - y0, svg::hex(kParts[i].colour),
                          " class=\"" + std::string(kParts[i].name) + "\" stroke=\"white\" stroke-width=\"0.5\"");
        base += v[i];
      }
      if (v[kWait] > 0)
        body += svg::text(x + kBar / 2, y.map(total * unit) - 9, 10, percent(v[kWait], total), "middle",
                          " fill=\"#c03030\"");
      body += svg::text(x + kBar / 2, area.y + area.h + 12, 11, std::to_string(k), "middle", " fill=\"#333\"");
      x += kBar + kBarGap;
    }
    const double group_right = x - kBarGap;
    body += svg::text((group_left + group_right) / 2, area.y + area.h + 30, 12, shown[g]->name, "middle",
                      " font-weight=\"bold\" fill=\"#222\"");
    x += kGroupGap - kBarGap;
  }
  body += svg::text(area.x - 8, area.y + area.h + 12, 11, "rank", "end", " fill=\"#333\"");
  std::vector<LegendEntry> legend;
  for (int i = kNumParts - 1; i >= 0; --i)
    if (used[i]) legend.push_back({kParts[i].label, kParts[i].colour, LegendEntry::Swatch::box});
  const double legend_x = area.x + area.w + 24;
  body += draw_legend(legend, legend_x, area.y);
  return {"phases.svg",
          page("Where each rank's step time goes",
               "mean over the steps after the first; red figure: share of the step spent waiting on pipeline transfers",
               std::max(legend_x + legend_width(legend) + 20, 720.0), area.y + area.h + 56, body),
          ""};
}

}  // namespace mt::plot
