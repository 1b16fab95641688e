// loss.svg and the other per-step series (lr, grad_norm, tokens_per_s): runs overlaid, one colour each.
#include <algorithm>

#include "plot/chart.hpp"
#include "plot/charts.hpp"
#include "plot/colour.hpp"
#include "plot/legend.hpp"
#include "plot/smooth.hpp"

namespace mt::plot {

namespace {

std::vector<double> steps_of(const RunData& r) { return {r.steps.begin(), r.steps.end()}; }

// Noisy series: every step as a thin light line, the running mean over `window` steps in bold; without
// a window (0 or 1) the bold line alone.
void add_lines(Panel& p, const std::vector<double>& x, const std::vector<double>& y, svg::Rgb colour,
               long long window) {
  if (window <= 1) {
    p.series.push_back({"raw", colour, x, y, 2});
    return;
  }
  p.series.push_back({"raw", colour, x, y, 1, 0.3});
  p.series.push_back({"smooth", colour, x, smooth(x, y, window), 2.2});
}

std::string lines_note(long long window) {
  return window > 1 ? "light: every step; bold: running mean over " + std::to_string(window) + " steps"
                    : "a point per step";
}

std::string overlay_page(const std::string& title, const std::string& note, const Panel& panel,
                         const std::vector<LegendEntry>& legend) {
  const Box box{10, kPageTop, 780, 460};
  const double legend_x = box.x + box.w + 16;
  const double width = std::max(960.0, legend_x + legend_width(legend) + 20);
  return page(title, note, width, box.y + box.h + 16,
              draw_panel(panel, box) + draw_legend(legend, legend_x, plot_area(box).y));
}

std::vector<LegendEntry> run_legend(const std::vector<Run>& runs) {
  std::vector<LegendEntry> out;
  for (size_t i = 0; i < runs.size(); ++i) out.push_back({runs[i].name, category_colour(i)});
  return out;
}

}  // namespace

Chart loss_chart(const std::vector<Run>& runs, bool log_steps, long long window) {
  Panel p{"", "step", "loss (nats per token)", log_steps, {}};
  bool evals = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i].data;
    add_lines(p, steps_of(r), r.scalar("loss"), category_colour(i), window);
    evals = evals || !r.eval_steps.empty();
  }
  // Validation dots last, over the lines.
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i].data;
    p.series.push_back(
        {"eval", category_colour(i), {r.eval_steps.begin(), r.eval_steps.end()}, r.eval_loss, 0, 1, true});
  }
  std::vector<LegendEntry> legend = run_legend(runs);
  if (evals) legend.push_back({"validation loss", {110, 110, 110}, LegendEntry::Swatch::dot});
  return {"loss.svg", overlay_page("Loss", lines_note(window) + (evals ? "; dots: validation loss" : ""), p, legend),
          ""};
}

Chart scalar_chart(const std::vector<Run>& runs, const std::string& series, const std::string& title,
                   const std::string& y_label, long long window, bool log_steps, bool log_y) {
  Panel p{"", "step", y_label, log_steps, {}, log_y};
  for (size_t i = 0; i < runs.size(); ++i)
    add_lines(p, steps_of(runs[i].data), runs[i].data.scalar(series), category_colour(i), window);
  return {series + ".svg", overlay_page(title, lines_note(window), p, run_legend(runs)), ""};
}

}  // namespace mt::plot
