// expert_load.svg: per run, every expert of every MoE layer as a row of cells over the steps,
// coloured by its load relative to the balanced share (blue under, white balanced, red over).
#include <algorithm>
#include <cmath>

#include "inspect/moe_layer_name.hpp"
#include "plot/chart.hpp"
#include "plot/charts.hpp"
#include "plot/colour.hpp"

namespace mt::plot {

namespace {

constexpr double kLeft = 100, kWidth = 760, kLayerGap = 8, kPanelGap = 12;
// Cells drawn per chart: long runs are averaged into column bins to stay within it.
constexpr double kMaxCells = 200000;

double row_height(const RunData& r) { return std::clamp(360.0 / (r.moe_layers * r.experts), 1.0, 12.0); }

// The cells of all layers, gaps between layers included.
double cells_height(const RunData& r) { return r.moe_layers * (r.experts * row_height(r) + kLayerGap) - kLayerGap; }
// With the run's name above and the step axis below.
double panel_height(const RunData& r) { return 26 + cells_height(r) + 44; }

// Heatmap of one run at `top`; returns its SVG.
std::string heatmap(const Run& run, double top) {
  const RunData& r = run.data;
  const size_t n = r.steps.size();
  const int rows = r.moe_layers * r.experts;
  const size_t cols = std::clamp<size_t>(size_t(kMaxCells / rows), 1, std::min<size_t>(n, 400));
  const double rh = row_height(r);
  const Box area{kLeft, top + 26, kWidth, cells_height(r)};
  // Each logged step owns one unit of the axis, centred on its number.
  const Axis x(double(r.steps.front()) - 0.5, double(r.steps.back()) + 0.5, area.x, area.x + area.w, false);
  const FlatConfig config = flatten_config(r.config_toml, r.dir + "/log.h5 (config_toml)");
  std::string out = svg::text(area.x, top + 12, 13, run.name, "start", " font-weight=\"bold\" fill=\"#222\"");
  out += x_axis_marks(x, area, "step");
  for (int l = 0; l < r.moe_layers; ++l) {
    const double y0 = area.y + l * (r.experts * rh + kLayerGap);
    out += svg::text(area.x - 8, y0 + r.experts * rh / 2, 11, moe_layer_name(config, size_t(l)), "end",
                     " fill=\"#333\"");
    for (size_t c = 0; c < cols; ++c) {
      const size_t a = c * n / cols, b = (c + 1) * n / cols;
      const double left = x.map(r.steps[a] - 0.5), right = x.map(r.steps[b - 1] + 0.5);
      for (int e = 0; e < r.experts; ++e) {
        double sum = 0;
        for (size_t s = a; s < b; ++s) sum += r.load(s, l, e);
        const svg::Rgb colour = diverging(load_position(sum / (b - a), r.experts));
        // A hair wider than the column, so anti-aliasing leaves no seams between cells.
        out += svg::rect(left, y0 + e * rh, right - left + 0.4, rh + (rh > 2 ? 0 : 0.3), svg::hex(colour));
      }
    }
    out += svg::rect(area.x, y0, area.w, r.experts * rh, "none", " stroke=\"#999\"");
  }
  return out;
}

// Vertical colour bar: a quarter of the balanced load at the bottom to four times it at the top.
std::string colour_bar(double x, double y) {
  constexpr double kHeight = 220, kSlices = 88;
  std::string out = svg::text(x, y - 22, 12, "load / balanced share", "start", " fill=\"#222\"");
  for (int i = 0; i < kSlices; ++i) {
    const double t = 1 - 2 * (i + 0.5) / kSlices;
    out += svg::rect(x, y + i * kHeight / kSlices, 22, kHeight / kSlices + 0.3, svg::hex(diverging(t)));
  }
  out += svg::rect(x, y, 22, kHeight, "none", " stroke=\"#999\"");
  const char* labels[] = {"4\u00d7", "2\u00d7", "1\u00d7 balanced", "\u00bd\u00d7", "\u00bc\u00d7 or idle"};
  for (int i = 0; i < 5; ++i) {
    const double py = y + i * kHeight / 4;
    out += svg::line(x + 22, py, x + 27, py, "#333", 1);
    out += svg::text(x + 31, py, 11, labels[i], "start", " fill=\"#333\"");
  }
  return out;
}

}  // namespace

Chart expert_load_chart(const std::vector<Run>& runs) {
  std::string body;
  double top = kPageTop;
  for (const Run& run : runs) {
    if (run.data.moe_layers == 0 || run.data.experts == 0 || run.data.steps.empty()) continue;
    body += heatmap(run, top);
    top += panel_height(run.data) + kPanelGap;
  }
  if (body.empty()) return {"expert_load.svg", "", "no run has MoE layers (dense models route no tokens)"};
  body += colour_bar(kLeft + kWidth + 30, kPageTop + 50);
  return {"expert_load.svg",
          page("Expert load",
               "fraction of each MoE layer's routed tokens per expert (one row per expert, expert 0 on top) "
               "over the balanced share 1/experts",
               kLeft + kWidth + 170, std::max(top - kPanelGap + 16, kPageTop + 300), body),
          ""};
}

}  // namespace mt::plot
