// The pure parts of `moetrain plot`: axis ticks and mapping, tick labels, colour maps, SVG
// escaping, smoothing, and the charts drawn from a made-up run.
#include <doctest/doctest.h>

#include <cmath>
#include <regex>

#include "plot/axis.hpp"
#include "plot/charts.hpp"
#include "plot/colour.hpp"
#include "plot/smooth.hpp"
#include "util/svg.hpp"

using namespace mt::plot;

namespace {
void check_near(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]));
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A run of `steps` steps with two MoE layers of four experts, or dense; `ranks` ranks.
Run fake_run(const std::string& name, int steps, bool moe, int ranks) {
  Run r{name, {}};
  for (int s = 1; s <= steps; ++s) {
    r.data.steps.push_back(s);
    for (const char* k : {"loss", "lr", "grad_norm", "tokens_per_s"}) r.data.scalars[k].push_back(5.0 / s + 0.1 * (s % 3));
  }
  r.data.eval_steps = {steps / 2, steps};
  r.data.eval_loss = {3.0, 2.5};
  if (moe) {
    r.data.moe_layers = 2, r.data.experts = 4;
    for (int i = 0; i < steps * 8; ++i) r.data.expert_load.push_back(0.25f + 0.05f * ((i % 4) - 1.5f));
    r.data.expert_bias.assign(r.data.expert_load.size(), 0.01f);
  }
  r.data.ranks = ranks;
  r.data.phase_names = {"compute", "tp_comm", "ep_comm", "pipeline_wait", "grad_sync", "optimizer", "step"};
  for (int s = 0; s < steps; ++s)
    for (int k = 0; k < ranks; ++k)
      for (float v : {0.5f, 0.0f, 0.1f, 0.2f * k, 0.05f, 0.05f, 1.0f}) r.data.rank_phases.push_back(v);
  return r;
}
}  // namespace

TEST_CASE("nice ticks are 1, 2 or 5 times a power of ten, inside the range") {
  CHECK(nice_step(1, 6) == doctest::Approx(0.2));
  CHECK(nice_step(94, 6) == doctest::Approx(20));
  CHECK(nice_step(0.0007, 6) == doctest::Approx(1e-4));
  CHECK(nice_step(4e6, 6) == doctest::Approx(5e5));
  check_near(nice_ticks(0, 1), {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  check_near(nice_ticks(3, 97), {20, 40, 60, 80});
  check_near(nice_ticks(-0.35, 0.35), {-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3});
  check_near(log_ticks(1, 150), {1, 2, 5, 10, 20, 50, 100});
  check_near(log_ticks(0.9, 2e5), {1, 10, 100, 1e3, 1e4, 1e5});
}

TEST_CASE("tick labels have the digits the spacing needs") {
  CHECK(tick_label(0.1 * 3, 0.1) == "0.3");
  CHECK(tick_label(0.25, 0.05) == "0.25");
  CHECK(tick_label(1e-17, 0.2) == "0");
  CHECK(tick_label(120, 20) == "120");
  CHECK(tick_label(16000, 2000) == "16k");
  CHECK(tick_label(1500, 500) == "1.5k");
  CHECK(tick_label(2e6, 1e6) == "2M");
  CHECK(tick_label(0.0015, 5e-4) == "0.0015");
  CHECK(tick_label(3e-5, 1e-5) == "3e-05");
  CHECK(tick_label(1.5e-5, 5e-6) == "1.5e-05");
}

TEST_CASE("axes map data onto pixels, linearly or logarithmically") {
  const Axis x(0, 10, 100, 200, false);
  CHECK(x.map(5) == doctest::Approx(150));
  const Axis y(0, 10, 300, 100, false);  // y grows upwards
  CHECK(y.map(10) == doctest::Approx(100));
  CHECK(y.map(0) == doctest::Approx(300));
  const Axis lx(1, 100, 0, 200, true);
  CHECK(lx.map(1) == doctest::Approx(0));
  CHECK(lx.map(10) == doctest::Approx(100));
  CHECK(lx.map(100) == doctest::Approx(200));
  CHECK(lx.label(20) == "20");
  const Axis flat(5, 5, 0, 100, false);  // one value: widened around it
  CHECK(flat.lo() < 5);
  CHECK(flat.hi() > 5);
  CHECK(flat.map(5) == doctest::Approx(50));
  const Axis one_step(7, 7, 0, 100, true);
  CHECK(one_step.lo() < 7);
  CHECK(std::isfinite(one_step.map(7)));
}

TEST_CASE("colours: categories differ, the load map diverges from white at balance") {
  CHECK(mt::svg::hex(category_colour(0)) != mt::svg::hex(category_colour(1)));
  CHECK(mt::svg::hex(category_colour(0)) == mt::svg::hex(category_colour(10)));
  CHECK(mt::svg::hex(diverging(0)) == "#f7f7f7");
  CHECK(mt::svg::hex(diverging(1)) == "#b2182b");
  CHECK(mt::svg::hex(diverging(7)) == "#b2182b");
  CHECK(mt::svg::hex(diverging(-1)) == "#2166ac");
  CHECK(diverging(0.5).r > diverging(0.5).b);   // over-loaded: red
  CHECK(diverging(-0.5).b > diverging(-0.5).r);  // under-loaded: blue
  CHECK(load_position(1.0 / 8, 8) == doctest::Approx(0));
  CHECK(load_position(0.5, 8) == doctest::Approx(1));       // four times balanced
  CHECK(load_position(1.0 / 16, 8) == doctest::Approx(-0.5));  // half
  CHECK(load_position(0, 8) == -1);                          // idle
}

TEST_CASE("SVG text is escaped and the document is self-contained SVG 1.1") {
  CHECK(mt::svg::escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  const std::string t = mt::svg::text(1, 2, 10, "x & y");
  CHECK(t.find(">x &amp; y</text>") != std::string::npos);
  const std::string doc = mt::svg::document(300, 200, t);
  CHECK(doc.find("version=\"1.1\" width=\"300\" height=\"200\" viewBox=\"0 0 300 200\"") != std::string::npos);
  CHECK(doc.find("font-family=\"sans-serif\"") != std::string::npos);
  CHECK(doc.find("<script") == std::string::npos);
  CHECK(mt::svg::polyline({{1, 2}, {3.5, 4}}, "#000", 1).find("points=\"1.00,2.00 3.50,4.00\"") != std::string::npos);
}

TEST_CASE("smoothing is a running mean over the steps up to each point that keeps gaps") {
  check_near(smooth({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, 2), {1, 1.5, 2.5, 3.5, 4.5});
  check_near(smooth({1, 2, 3}, {1, 2, 3}, 1), {1, 2, 3});
  check_near(smooth({1, 2, 5, 6}, {2, 4, 6, 8}, 3), {2, 3, 6, 7});  // steps 3 and 4 were not logged
  const std::vector<double> s = smooth({1, 2, 3, 4}, {1, NAN, 3, 5}, 3);
  CHECK(s[0] == 1);
  CHECK(std::isnan(s[1]));
  CHECK(s[2] == 2);
  CHECK(s[3] == 4);
  CHECK(default_smoothing_window(49) == 0);
  CHECK(default_smoothing_window(500) == 20);
}

TEST_CASE("loss chart: a legend entry per run, a point per step, a dot per evaluation") {
  const std::vector<Run> runs = {fake_run("a & b", 200, true, 1), fake_run("c", 3, true, 1)};
  const Chart c = loss_chart(runs, true, 8);
  CHECK(c.skipped.empty());
  CHECK(c.svg.find(">a &amp; b</text>") != std::string::npos);
  CHECK(c.svg.find(">c</text>") != std::string::npos);
  CHECK(c.svg.find("step (log scale)") != std::string::npos);
  // Raw lines in run order: every step of the long run, then the short one's.
  std::regex raw("<polyline points=\"([^\"]*)\"[^>]*class=\"raw\"");
  std::vector<int> points;
  for (auto it = std::sregex_iterator(c.svg.begin(), c.svg.end(), raw); it != std::sregex_iterator(); ++it)
    points.push_back(count((*it)[1].str(), ",") );
  CHECK(points == std::vector<int>{200, 3});
  CHECK(count(c.svg, "class=\"smooth\"") == 2);  // the same window for both runs
  CHECK(c.svg.find("bold: running mean over 8 steps") != std::string::npos);
  CHECK(count(c.svg, "<circle") == 4 + 1);        // two evaluations per run, and the legend's dot
}

TEST_CASE("charts that do not apply are skipped with the reason") {
  const std::vector<Run> dense = {fake_run("dense", 5, false, 1)};
  CHECK(expert_load_chart(dense).svg.empty());
  CHECK(expert_load_chart(dense).skipped.find("no run has MoE layers") != std::string::npos);
  CHECK(expert_bias_chart(dense, false).svg.empty());
  CHECK(phases_chart(dense).skipped.find("one rank") != std::string::npos);
}

TEST_CASE("expert and phase charts draw a cell per step and expert, a bar segment per rank and phase") {
  const std::vector<Run> runs = {fake_run("moe", 6, true, 2)};
  const Chart load = expert_load_chart(runs);
  CHECK(count(load.svg, ">MoE layer ") == 2);  // a log without its config: no block numbers
  CHECK(count(load.svg, "<rect") >= 6 * 2 * 4);
  CHECK(count(expert_bias_chart(runs, false).svg, "class=\"expert\"") == 2 * 4);
  const Chart phases = phases_chart(runs);
  // Rank 0 never waits on the pipeline, rank 1 does: one red segment, one share label.
  CHECK(count(phases.svg, "class=\"pipeline_wait\"") == 1);
  CHECK(count(phases.svg, "class=\"compute\"") == 2);
  CHECK(phases.svg.find(">pipeline wait (bubble)</text>") != std::string::npos);
}
