#include "pipeline/draw_svg.hpp"

#include <algorithm>
#include <set>

#include "util/svg.hpp"

namespace mt::pipeline {

namespace {

constexpr double kLeft = 70, kTop = 50, kRow = 30, kWidth = 1400;

// Base colours per pass; later chunks are mixed towards white so two directions (or the
// virtual chunks of interleaving) stay apart.
svg::Rgb base(Pass p) {
  switch (p) {
    case Pass::forward: return {232, 140, 48};
    case Pass::backward: return {64, 156, 96};
    case Pass::input_grad: return {70, 120, 200};
    case Pass::weight_grad: return {140, 90, 190};
  }
  return {128, 128, 128};
}

std::string colour(Pass p, int chunk, int chunks) {
  svg::Rgb c = base(p);
  double mix = chunks > 1 ? 0.6 * chunk / (chunks - 1) : 0.0;
  auto lift = [&](int v) { return static_cast<int>(v + (255 - v) * mix); };
  return svg::hex({lift(c.r), lift(c.g), lift(c.b)});
}

std::string rect(double x, double y, double w, double h, const std::string& fill) {
  return svg::rect(x, y, w, h, fill, " stroke=\"#333\" stroke-width=\"0.6\"");
}

using svg::text;

std::string box(const TimedOp& t, double y, double scale, int chunks) {
  double x = kLeft + t.start * scale, w = (t.end - t.start) * scale, h = kRow - 4;
  double font = std::clamp(w * 0.45, 5.0, 11.0);
  const Task& a = t.op.task;
  if (!t.op.overlapped_backward)
    return rect(x, y + 2, w, h, colour(a.pass, a.chunk, chunks)) +
           text(x + w / 2, y + 2 + h / 2, font, std::to_string(a.microbatch));
  const Task& b = *t.op.overlapped_backward;
  return rect(x, y + 2, w, h / 2, colour(a.pass, a.chunk, chunks)) +
         rect(x, y + 2 + h / 2, w, h / 2, colour(b.pass, b.chunk, chunks)) +
         text(x + w / 2, y + 2 + h / 4, font * 0.9, std::to_string(a.microbatch)) +
         text(x + w / 2, y + 2 + 3 * h / 4, font * 0.9, std::to_string(b.microbatch));
}

}  // namespace

std::string timeline_svg(const Schedule& s, const Timeline& tl, const std::string& title) {
  const int chunks = s.placement.chunks_per_rank;
  const double scale = tl.makespan > 0 ? kWidth / tl.makespan : 1;
  std::string body;
  body += text(kLeft, 20, 15, title, "start");
  for (size_t r = 0; r < tl.ranks.size(); ++r) {
    double y = kTop + kRow * r;
    body += text(kLeft - 10, y + kRow / 2, 12, "rank " + std::to_string(r), "end");
    for (const TimedOp& t : tl.ranks[r]) body += box(t, y, scale, chunks);
  }
  // Legend: one swatch per pass and chunk that occurs.
  std::set<std::pair<int, int>> used;
  for (const auto& ops : tl.ranks)
    for (const TimedOp& t : ops)
      for (const Task& task : tasks_of(t.op)) used.insert({static_cast<int>(task.pass), task.chunk});
  double lx = kLeft, ly = kTop + kRow * tl.ranks.size() + 20;
  const char* names[] = {"forward", "backward", "backward for input", "backward for weights"};
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < chunks; ++c) {
      if (!used.count({p, c})) continue;
      std::string label = names[p];
      if (chunks > 1) label += s.kind == Kind::dualpipe ? (c == 0 ? " (direction 0)" : " (direction 1)")
                                                        : " (chunk " + std::to_string(c) + ")";
      body += rect(lx, ly, 14, 14, colour(static_cast<Pass>(p), c, chunks));
      body += text(lx + 18, ly + 7, 10, label, "start");
      lx += 28 + 6.0 * label.size();
      if (lx > kLeft + kWidth - 150) {
        lx = kLeft;
        ly += 18;
      }
    }
  if (s.kind == Kind::dualpipe || s.kind == Kind::dualpipev)
    body += text(lx + 4, ly + 7, 10, "split box: overlapped F&B pair, forward on top", "start");
  return svg::document(kLeft + kWidth + 20, ly + 30, body);
}

}  // namespace mt::pipeline
