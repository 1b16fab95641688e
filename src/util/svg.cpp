#include "util/svg.hpp"

#include <cstdio>

#include "util/format.hpp"

namespace mt::svg {

std::string hex(Rgb c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string num(double v) { return format_number("%.2f", v); }

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string rect(double x, double y, double w, double h, const std::string& fill, const std::string& attrs) {
  return "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" fill=\"" + fill + "\"" + attrs + "/>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
                 const std::string& attrs) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" stroke=\"" + stroke + "\" stroke-width=\"" + format_number("%g", width) + "\"" + attrs + "/>\n";
}

std::string polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width,
                     const std::string& attrs) {
  std::string pts;
  pts.reserve(points.size() * 14);
  for (const auto& [x, y] : points) {
    if (!pts.empty()) pts += ' ';
    pts += num(x) + "," + num(y);
  }
  return "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"" +
         format_number("%g", width) + "\" stroke-linejoin=\"round\"" + attrs + "/>\n";
}

std::string circle(double cx, double cy, double r, const std::string& fill, const std::string& attrs) {
  return "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" + fill + "\"" + attrs +
         "/>\n";
}

std::string text(double x, double y, double size, const std::string& s, const char* anchor, const std::string& attrs) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + format_number("%.1f", size) +
         "\" text-anchor=\"" + anchor + "\" dominant-baseline=\"central\"" + attrs + ">" + escape(s) + "</text>\n";
}

std::string document(double width, double height, const std::string& body) {
  const std::string w = format_number("%.0f", width), h = format_number("%.0f", height);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"sans-serif\">\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body + "</svg>\n";
}

}  // namespace mt::svg
