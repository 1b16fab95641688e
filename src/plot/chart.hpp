#pragma once
// Line-chart panels (frame, grid, ticks, labelled axes, lines and dots) and the page around
// the panels of one chart file.
#include <string>
#include <vector>

#include "plot/axis.hpp"
#include "util/svg.hpp"

namespace mt::plot {

struct Box {
  double x = 0, y = 0, w = 0, h = 0;
};

struct Series {
  std::string css_class;     // what the line is ("raw", "smooth", "eval", "expert"), so files can be checked
  svg::Rgb colour;
  std::vector<double> x, y;  // a point with a non-finite y leaves a gap
  double width = 1.5, opacity = 1;
  bool dots = false;         // a dot per point instead of a line
};

struct Panel {
  std::string title;  // empty in a chart of one panel, which has the page's title
  std::string x_label = "step", y_label;
  bool log_x = false;
  std::vector<Series> series;
  bool log_y = false;  // for series whose spikes would flatten the rest
};

// The plot area inside a panel's box: room above for the title, left for tick labels and
// below for the x label.
Box plot_area(const Box& box);
// Grid lines, ticks and their labels, and the axis name, along the bottom (x) or left (y) edge
// of `area`.
std::string x_axis_marks(const Axis& a, const Box& area, const std::string& name);
std::string y_axis_marks(const Axis& a, const Box& area, const std::string& name);
std::string draw_panel(const Panel& p, const Box& box);

// A chart file: the title, a grey note under it, then the body, which starts at kPageTop.
constexpr double kPageTop = 60;
std::string page(const std::string& title, const std::string& note, double width, double height,
                 const std::string& body);

}  // namespace mt::plot
