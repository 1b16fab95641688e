#include "plot/chart.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mt::plot {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const std::string kGrid = "#e6e6e6", kInk = "#333333";

struct Range {
  double lo = kInf, hi = -kInf;
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return !(hi >= lo); }
};

std::string draw_series(const Series& s, const Axis& x, const Axis& y) {
  const std::string colour = svg::hex(s.colour);
  const std::string attrs = " class=\"" + s.css_class + "\"" +
                            (s.opacity < 1 ? " opacity=\"" + svg::num(s.opacity) + "\"" : std::string());
  std::string out;
  std::vector<std::pair<double, double>> run;
  auto flush = [&] {
    if (!run.empty()) out += svg::polyline(run, colour, s.width, attrs);
    run.clear();
  };
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    const bool ok = std::isfinite(s.y[i]) && (!x.log() || s.x[i] > 0) && (!y.log() || s.y[i] > 0);
    if (!ok) {
      flush();
    } else if (s.dots) {
      out += svg::circle(x.map(s.x[i]), y.map(s.y[i]), 3.5, colour, attrs + " stroke=\"white\" stroke-width=\"1\"");
    } else {
      run.emplace_back(x.map(s.x[i]), y.map(s.y[i]));
    }
  }
  flush();
  return out;
}

}  // namespace

Box plot_area(const Box& box) { return {box.x + 64, box.y + 26, box.w - 76, box.h - 26 - 44}; }

std::string x_axis_marks(const Axis& a, const Box& area, const std::string& name) {
  std::string out;
  const double bottom = area.y + area.h;
  for (double t : a.ticks()) {
    const double px = a.map(t);
    out += svg::line(px, area.y, px, bottom, kGrid, 1);
    out += svg::line(px, bottom, px, bottom + 4, kInk, 1);
    out += svg::text(px, bottom + 14, 11, a.label(t), "middle", " fill=\"#333\"");
  }
  out += svg::text(area.x + area.w / 2, bottom + 32, 12, name, "middle", " fill=\"#222\"");
  return out;
}

std::string y_axis_marks(const Axis& a, const Box& area, const std::string& name) {
  std::string out;
  for (double t : a.ticks()) {
    const double py = a.map(t);
    out += svg::line(area.x, py, area.x + area.w, py, kGrid, 1);
    out += svg::line(area.x - 4, py, area.x, py, kInk, 1);
    out += svg::text(area.x - 7, py, 11, a.label(t), "end", " fill=\"#333\"");
  }
  const double cx = area.x - 56, cy = area.y + area.h / 2;
  const std::string turn = " transform=\"rotate(-90 " + svg::num(cx) + " " + svg::num(cy) + ")\"";
  out += svg::text(cx, cy, 12, name, "middle", " fill=\"#222\"" + turn);
  return out;
}

std::string draw_panel(const Panel& p, const Box& box) {
  const Box area = plot_area(box);
  std::string out =
      p.title.empty() ? "" : svg::text(area.x, box.y + 12, 13, p.title, "start", " font-weight=\"bold\" fill=\"#222\"");
  Range xr, yr;
  for (const Series& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i]) && std::isfinite(s.x[i]) && (!p.log_x || s.x[i] > 0) && (!p.log_y || s.y[i] > 0))
        xr.add(s.x[i]), yr.add(s.y[i]);
  if (xr.empty()) {
    out += svg::rect(area.x, area.y, area.w, area.h, "none", " stroke=\"#999\"");
    return out +
           svg::text(area.x + area.w / 2, area.y + area.h / 2, 12, "no finite values", "middle", " fill=\"#777\"");
  }
  // A little air above and below the lines; steps run edge to edge.
  const double pad = p.log_y ? std::pow(yr.hi / yr.lo, 0.04) : (yr.hi - yr.lo) * 0.04;
  const Axis x(xr.lo, xr.hi, area.x, area.x + area.w, p.log_x);
  const Axis y(p.log_y ? yr.lo / pad : yr.lo - pad, p.log_y ? yr.hi * pad : yr.hi + pad, area.y + area.h, area.y,
               p.log_y);
  out += x_axis_marks(x, area, p.x_label + (p.log_x ? " (log scale)" : ""));
  out += y_axis_marks(y, area, p.y_label + (p.log_y ? " (log scale)" : ""));
  for (const Series& s : p.series) out += draw_series(s, x, y);
  out += svg::rect(area.x, area.y, area.w, area.h, "none", " stroke=\"#999\"");
  return out;
}

std::string page(const std::string& title, const std::string& note, double width, double height,
                 const std::string& body) {
  return svg::document(width, height,
                       svg::text(20, 22, 17, title, "start", " font-weight=\"bold\" fill=\"#111\"") +
                           svg::text(20, 42, 12, note, "start", " fill=\"#666\"") + body);
}

}  // namespace mt::plot
