#include "plan/plan_report.hpp"

#include <cstdio>

#include "util/format.hpp"

namespace mt::plan {

namespace {

struct Part {
  const char* name;
  double Breakdown::*field;
};
const Part kParts[] = {{"compute", &Breakdown::compute},     {"tp comm", &Breakdown::tp},
                       {"cp comm", &Breakdown::cp},          {"ep comm", &Breakdown::ep},
                       {"imbalance", &Breakdown::imbalance}, {"bubble", &Breakdown::bubble},
                       {"dp comm", &Breakdown::dp},          {"optimizer", &Breakdown::optimizer}};

}  // namespace

std::string estimates_table(const std::vector<Estimate>& rows) {
  std::string out =
      " #  step s   MFU  tok/s/acc  mem GB "
      "| compute  tp comm  cp comm  ep comm imbalance  bubble  dp comm      opt | layout\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Estimate& e = rows[i];
    char line[256];
    std::snprintf(line, sizeof line, "%2zu %7.3f %5.1f%% %10.0f %7.1f%s|", i + 1, e.step_s, 100 * e.mfu,
                  e.tokens_per_s_per_accel, e.memory.total() / 1e9, e.fits ? " " : "!");
    out += line;
    for (const Part& p : kParts) out += format_number(" %8.3f", e.time.*p.field);
    out += " | " + layout_text(e.layout) + "\n";
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const Layout& l = rows[i].layout;
    // The room for what the experts' all-to-all may bring beyond the average, as the run reserves it.
    if (l.ep == 1 || rows[i].memory.ep_headroom == 0) continue;
    const std::string bound = l.ep_receive_bound == 0 ? "worst" : format_number("%g", l.ep_receive_bound);
    out += "(#" + std::to_string(i + 1) + ": mem holds the room for expert-parallel arrivals that " +
           "parallel.ep_receive_bound = " + bound + " reserves, " +
           format_number("%.1f", rows[i].memory.ep_headroom / 1e9) + " GB over room for the average arrivals)\n";
  }
  bool any_too_big = false;
  for (const auto& e : rows) any_too_big |= !e.fits;
  if (any_too_big) out += "(! = does not fit in memory)\n";
  return out;
}

std::string estimates_json(const std::string& model, const Cluster& c, int gpus, const std::vector<Estimate>& rows) {
  std::string out = "{\"model\":\"" + model + "\",\"cluster\":\"" + c.name +
                    "\",\"accelerators\":" + std::to_string(gpus) + ",\"layouts\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Estimate& e = rows[i];
    const Layout& l = e.layout;
    out += i ? "," : "";
    out += "{\"dp\":" + std::to_string(l.dp) + ",\"tp\":" + std::to_string(l.tp) + ",\"cp\":" + std::to_string(l.cp) +
           ",\"pp\":" + std::to_string(l.pp) + ",\"ep\":" + std::to_string(l.ep) + ",\"vpp\":" + std::to_string(l.vpp) +
           ",\"schedule\":\"" + (l.scheduled() ? pipeline::kind_name(l.schedule) : "none") +
           "\",\"zero\":" + std::to_string(l.zero) + ",\"micro_batch\":" + std::to_string(l.micro_batch) +
           ",\"recompute\":\"" + name_of(l.recompute) + "\",\"fp8\":" + (l.fp8 ? "true" : "false") + ",\"storage\":\"" +
           name_of(l.storage) + "\",\"microbatches\":" + std::to_string(e.microbatches) +
           ",\"step_s\":" + format_number("%.6g", e.step_s) + ",\"mfu\":" + format_number("%.6g", e.mfu) +
           ",\"tokens_per_s_per_accelerator\":" + format_number("%.6g", e.tokens_per_s_per_accel) +
           ",\"memory_bytes\":" + format_number("%.6g", e.memory.total()) +
           ",\"activation_bytes\":" + format_number("%.6g", e.memory.activations) + ",\"ep_receive_bound\":" +
           (l.ep_receive_bound == 0 ? "\"worst\"" : format_number("%g", l.ep_receive_bound)) +
           ",\"ep_arrival_room_over_average_bytes\":" + format_number("%.6g", e.memory.ep_headroom) +
           ",\"fits\":" + (e.fits ? "true" : "false") +
           ",\"time\":{";
    for (size_t p = 0; p < std::size(kParts); ++p)
      out += std::string(p ? "," : "") + "\"" + kParts[p].name + "\":" + format_number("%.6g", e.time.*kParts[p].field);
    out += "},\"train_sets\":[";
    // Context parallelism is planned only: no train arguments run it.
    const std::vector<std::string> sets = l.cp > 1 ? std::vector<std::string>{} : train_sets(l);
    for (size_t s = 0; s < sets.size(); ++s) out += std::string(s ? "," : "") + "\"" + sets[s] + "\"";
    out += "]}";
  }
  return out + "]}\n";
}

std::string train_lines(const std::vector<Estimate>& rows) {
  std::string out = "train layout #N with the same experiment (and --set) as here:\n";
  for (size_t i = 0; i < rows.size(); ++i)
    out += format_number("%2.0f ", double(i + 1)) +
           (rows[i].layout.cp > 1 ? "context parallelism (cp): planned only; moetrain train does not run it yet"
                                  : train_set_line(rows[i].layout)) +
           "\n";
  return out;
}

std::string prediction_text(const Estimate& e, const Cluster& c) {
  const Memory& m = e.memory;
  // GB for a model of any size, MB below one GB (the demo models).
  const bool gb = m.total() >= 1e9;
  auto size = [&](double bytes) { return format_number(gb ? "%.2f" : "%.1f", bytes / (gb ? 1e9 : 1e6)); };
  char out[640];
  std::snprintf(out, sizeof out,
                "plan: %s on %d of %s (%s)\n"
                "  step      %.3f s predicted: MFU %.1f%%, %.0f tokens/s per accelerator, "
                "%d micro-batches per pipeline\n"
                "  memory    %s %s per rank (weights %s, gradients %s, optimizer %s, activations %s) of %.2f GB "
                "usable: %s\n",
                layout_text(e.layout).c_str(), e.layout.world(), c.name.c_str(), c.path.c_str(), e.step_s, 100 * e.mfu,
                e.tokens_per_s_per_accel, e.microbatches, size(m.total()).c_str(), gb ? "GB" : "MB",
                size(m.weights).c_str(), size(m.grads).c_str(), size(m.optimizer).c_str(), size(m.activations).c_str(),
                e.memory_limit / 1e9, e.fits ? "fits" : "does NOT fit");
  return out;
}

std::string explain(const Estimate* best, const Estimate* flat) {
  if (!best) return "no layout fits in memory\n";
  if (best->layout.pp == 1) return "the best layout uses no pipeline parallelism\n";
  if (!flat) return "no layout without pipeline parallelism fits in memory: the pipeline is needed to hold the model\n";
  std::string out = "best:            " + layout_text(best->layout) +
                    "\nbest without PP:  " + layout_text(flat->layout) + "\npart            with PP     without\n";
  for (const Part& p : kParts)
    out += std::string(p.name) + std::string(12 - std::string(p.name).size(), ' ') +
           format_number("%12.3f", best->time.*p.field) + format_number("%12.3f", flat->time.*p.field) + "\n";
  out += "step        " + format_number("%12.3f", best->step_s) + format_number("%12.3f", flat->step_s) + "\n";
  out += "memory GB   " + format_number("%12.1f", best->memory.total() / 1e9) +
         format_number("%12.1f", flat->memory.total() / 1e9) + "\n";
  // The parts that cost the flat layout the most, in the words of the trade-off.
  const Part* worst = &kParts[0];
  double worst_gap = -1e30;
  for (const Part& p : kParts) {
    double gap = flat->time.*p.field - best->time.*p.field;
    if (gap > worst_gap) worst_gap = gap, worst = &p;
  }
  out += "without PP the step is " + format_number("%.3f", flat->step_s - best->step_s) +
         " s longer; the largest difference is " + worst->name + " (" + format_number("%+.3f", worst_gap) + " s)";
  out += best->time.bubble > 0
             ? ", against a bubble of " + format_number("%.3f", best->time.bubble) + " s that the pipeline adds\n"
             : "\n";
  return out;
}

}  // namespace mt::plan
