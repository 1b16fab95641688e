// expert_bias.svg: the auxiliary-loss-free balancing bias of every expert over the steps, one
// panel per run and MoE layer, one line per expert.
#include <algorithm>

#include "inspect/moe_layer_name.hpp"
#include "plot/chart.hpp"
#include "plot/charts.hpp"
#include "plot/colour.hpp"
#include "plot/legend.hpp"

namespace mt::plot {

namespace {

constexpr double kPanelW = 420, kPanelH = 280;
constexpr int kColumns = 3;

Panel bias_panel(const Run& run, const FlatConfig& config, int layer, bool several_runs, bool log_steps) {
  const RunData& r = run.data;
  Panel p{(several_runs ? run.name + ", " : std::string()) + moe_layer_name(config, size_t(layer)), "step", "bias",
          log_steps, {}};
  const std::vector<double> x(r.steps.begin(), r.steps.end());
  for (int e = 0; e < r.experts; ++e) {
    std::vector<double> y(r.steps.size());
    for (size_t s = 0; s < y.size(); ++s) y[s] = r.bias(s, layer, e);
    p.series.push_back({"expert", category_colour(size_t(e)), x, y, 1.4});
  }
  return p;
}

}  // namespace

Chart expert_bias_chart(const std::vector<Run>& runs, bool log_steps) {
  std::vector<Panel> panels;
  int experts = 0;
  for (const Run& run : runs) {
    const FlatConfig config = flatten_config(run.data.config_toml, run.data.dir + "/log.h5 (config_toml)");
    for (int l = 0; l < run.data.moe_layers; ++l) {
      panels.push_back(bias_panel(run, config, l, runs.size() > 1, log_steps));
      experts = std::max(experts, run.data.experts);
    }
  }
  if (panels.empty()) return {"expert_bias.svg", "", "no run has MoE layers (dense models have no balancing bias)"};
  const int columns = std::min<int>(kColumns, panels.size());
  const int rows = int((panels.size() + columns - 1) / columns);
  std::string body;
  for (size_t i = 0; i < panels.size(); ++i)
    body += draw_panel(panels[i],
                       {10 + (i % columns) * kPanelW, kPageTop + (i / columns) * kPanelH, kPanelW - 10, kPanelH - 10});
  std::vector<LegendEntry> legend;
  // Ten colours: with more experts they repeat, and a legend would name two experts per colour.
  if (experts <= 10)
    for (int e = 0; e < experts; ++e) legend.push_back({"expert " + std::to_string(e), category_colour(e)});
  const double legend_x = 10 + columns * kPanelW + 6;
  body += draw_legend(legend, legend_x, kPageTop + 26);
  const std::string note = std::string("one line per expert") +
                           (experts > 10 ? " (colours repeat every 10 experts)" : "") +
                           "; raised for experts below the mean load, lowered above";
  return {"expert_bias.svg",
          page("Expert balancing bias", note, legend_x + legend_width(legend) + 20,
               std::max(kPageTop + rows * kPanelH + 6, kPageTop + 26 + legend.size() * kLegendRow + 20), body),
          ""};
}

}  // namespace mt::plot
