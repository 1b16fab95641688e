#include "pipeline/report.hpp"

#include <algorithm>
#include <cstdio>

#include "pipeline/published.hpp"

namespace mt::pipeline {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

template <class T>
std::string joined(const std::vector<T>& xs, const char* sep, const char* quote = "") {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) s += sep;
    if constexpr (std::is_same_v<T, std::string>)
      s += quote + xs[i] + quote;
    else
      s += num(xs[i]);
  }
  return s;
}

std::string costs_text(const Costs& c) {
  return "F=" + num(c.forward) + " B=" + num(c.backward) + " I=" + num(c.input_grad) + " W=" + num(c.weight_grad) +
         " F&B=" + num(c.overlapped) + " latency=" + num(c.latency);
}

std::vector<std::string> op_texts(const std::vector<ComputeOp>& ops) {
  std::vector<std::string> t;
  for (const ComputeOp& op : ops) t.push_back(op_text(op));
  return t;
}

}  // namespace

std::string schedule_text(const Schedule& s, const Timeline& tl, const Costs& costs) {
  const Placement& pl = s.placement;
  std::string out = "schedule " + kind_name(s.kind) + ": pp=" + std::to_string(s.pp) + ", " +
                    std::to_string(s.microbatches) + " micro-batches";
  if (pl.flows == 2) out += " (" + std::to_string(pl.microbatches_per_flow) + " per direction)";
  out += ", " + std::to_string(pl.chunks_per_rank) + " chunk(s) per rank, " + std::to_string(pl.stages) +
         " stages per micro-batch\n";
  out += "costs per chunk: " + costs_text(costs) + "\n";
  double busiest = *std::max_element(tl.busy.begin(), tl.busy.end());
  out += "makespan " + num(tl.makespan) + "; busiest rank computes for " + num(busiest) + "\n";
  PublishedBubble pub = published_bubble(s.kind, s.pp, costs);
  out += "bubble per rank: " + joined(tl.bubble, " ") + " (max " + num(tl.max_bubble()) + ", " +
         num(100 * tl.max_bubble() / tl.makespan) + "% of the makespan)\n";
  out += "published bubble " + pub.formula + " = " + num(pub.value) + "\n";
  out += "peak live activations per rank (chunks): " + joined(tl.peak_activations, " ") + "\n";
  auto order = compute_order(s);
  for (size_t r = 0; r < order.size(); ++r)
    out += "rank " + std::to_string(r) + ": " + joined(op_texts(order[r]), " ") + "\n";
  return out;
}

std::string schedule_json(const Schedule& s, const Timeline& tl, const Costs& costs) {
  std::string out = "{\"kind\":\"" + kind_name(s.kind) + "\",\"pp\":" + std::to_string(s.pp) +
                    ",\"microbatches\":" + std::to_string(s.microbatches) + ",\"vpp\":" + std::to_string(s.vpp) +
                    ",\"ranks\":[";
  auto order = compute_order(s);
  for (size_t r = 0; r < order.size(); ++r) out += (r ? ",[" : "[") + joined(op_texts(order[r]), ",", "\"") + "]";
  out += "],\"costs\":{\"F\":" + num(costs.forward) + ",\"B\":" + num(costs.backward) + ",\"I\":" +
         num(costs.input_grad) + ",\"W\":" + num(costs.weight_grad) + ",\"F&B\":" + num(costs.overlapped) +
         ",\"latency\":" + num(costs.latency) + "}";
  out += ",\"makespan\":" + num(tl.makespan) + ",\"bubble\":[" + joined(tl.bubble, ",") +
         "],\"peak_activations\":[" + joined(tl.peak_activations, ",") + "]}\n";
  return out;
}

}  // namespace mt::pipeline
