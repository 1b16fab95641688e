#pragma once
// SVG 1.1 pieces shared by the charts of `moetrain plot` and the schedule timelines: one element
// per call, text escaped, and the document around them (white background, sans-serif, viewBox
// so a browser can scale it).
#include <string>
#include <utility>
#include <vector>

namespace mt::svg {

struct Rgb {
  int r = 0, g = 0, b = 0;
};

std::string hex(Rgb c);                  // "#rrggbb"
std::string num(double v);               // coordinates: two decimals
std::string escape(const std::string&);  // & < > " ' as entities

// `attrs` is appended inside the element as written, e.g. " stroke=\"#333\"".
std::string rect(double x, double y, double w, double h, const std::string& fill, const std::string& attrs = "");
std::string line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
                 const std::string& attrs = "");
std::string polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width,
                     const std::string& attrs = "");
std::string circle(double cx, double cy, double r, const std::string& fill, const std::string& attrs = "");
// Text centred vertically on y; anchor: start, middle or end.
std::string text(double x, double y, double size, const std::string& s, const char* anchor = "middle",
                 const std::string& attrs = "");

std::string document(double width, double height, const std::string& body);

}  // namespace mt::svg
