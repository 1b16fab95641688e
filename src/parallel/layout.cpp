#include "parallel/layout.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "pipeline/schedule.hpp"
#include "util/error.hpp"

namespace mt {

ParallelLayout layout_of(const ParallelConfig& p, const ModelConfig& m) {
  ParallelLayout l{.dp = p.dp, .tp = p.tp, .pp = p.pp, .ep = p.ep};
  const bool dual = p.schedule == pipeline::Kind::dualpipe, v_shape = p.schedule == pipeline::Kind::dualpipev;
  l.mirrored = p.pp > 1 && dual;
  // DualPipeV's first and last stages share rank 0; DualPipe's pairs hold both ends.
  l.tied_embedding = p.pp > 1 && m.mtp.depth > 0 && !dual && !v_shape;
  return l;
}

std::string layout_text(const Layout& l) {
  std::ostringstream s;
  s << "dp=" << l.dp << " tp=" << l.tp << " pp=" << l.pp << " ep=" << l.ep << (l.sp ? " sp" : "");
  if (l.cp > 1) s << " cp=" << l.cp;
  if (l.scheduled()) s << " " << name_of(l.schedule);
  if (l.scheduled() && l.schedule == pipeline::Kind::interleaved) s << " vpp=" << l.vpp;
  s << " zero=" << l.zero << " mbs=" << l.micro_batch << " recompute=" << name_of(l.recompute) << (l.fp8 ? " fp8" : "");
  if (l.storage != Storage::bf16_recipe) s << " storage=" << name_of(l.storage);
  return s.str();
}

Layout parse_layout(const std::string& text, int gpus) {
  Layout l;
  bool dp_given = false;
  std::string items = text;
  std::replace(items.begin(), items.end(), ',', ' ');
  std::stringstream in(items);
  for (std::string item; in >> item;) {
    auto eq = item.find('=');
    std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    // layout_text's bare words: a schedule's name, and "fp8".
    pipeline::Kind named;
    if (eq == std::string::npos && value_of(item, named)) key = "schedule", value = item;
    if (item == "fp8" || item == "sp") key = item, value = "on";
    auto bad = [&](const std::string& valid) {
      return UserError("--layout " + text + ": '" + item + "': " + valid);
    };
    auto integer = [&](int lo) {
      try {
        size_t used = 0;
        int v = std::stoi(value, &used);
        if (used == value.size() && v >= lo) return v;
      } catch (const std::exception&) {
      }
      throw bad(key + " must be an integer >= " + std::to_string(lo));
    };
    if (key == "dp") l.dp = integer(1), dp_given = true;
    else if (key == "tp") l.tp = integer(1);
    else if (key == "pp") l.pp = integer(1);
    else if (key == "ep") l.ep = integer(1);
    else if (key == "cp") l.cp = integer(1);
    else if (key == "vpp") l.vpp = integer(1);
    else if (key == "mbs") l.micro_batch = integer(1);
    else if (key == "zero") {
      l.zero = integer(0);
      if (l.zero > 3) throw bad("zero must be 0, 1, 2 or 3 (3 = FSDP)");
    } else if (key == "schedule") l.schedule = pipeline::parse_kind(value);
    else if (key == "recompute") {
      if (!value_of(value, l.recompute)) throw bad("recompute must be none, selective or full");
    } else if (key == "fp8") {
      if (value != "on" && value != "off") throw bad("fp8 must be on or off");
      l.fp8 = value == "on";
    } else if (key == "sp") {
      if (value != "on" && value != "off") throw bad("sp must be on or off");
      l.sp = value == "on";
    } else if (key == "storage") {
      if (!value_of(value, l.storage))
        throw bad("storage must be bf16 (the BF16 recipe), fp32 (moetrain) or mixed (moetrain under bf16 GEMMs)");
    } else {
      throw bad(
          "unknown key; valid keys are dp, tp, pp, ep, cp, vpp, schedule, zero, mbs, recompute, fp8, sp, storage");
    }
  }
  if (l.sp && l.tp == 1) throw UserError("--layout " + text + ": sp (sequence parallelism) needs tp > 1");
  if (!dp_given) {
    if (gpus % (l.tp * l.cp * l.pp) != 0)
      throw UserError("--layout " + text + ": tp*cp*pp = " + std::to_string(l.tp * l.cp * l.pp) + " does not divide " +
                      std::to_string(gpus) + " accelerators");
    l.dp = gpus / (l.tp * l.cp * l.pp);
  }
  return l;
}

std::vector<std::string> train_sets(const Layout& l) {
  auto set = [](const std::string& key, const std::string& value) { return key + "=" + value; };
  auto n = [](int v) { return std::to_string(v); };
  // Without a schedule the micro-batches run one after another, which train calls 1f1b.
  const char* schedule = name_of(l.scheduled() ? l.schedule : pipeline::Kind::one_f_one_b);
  std::vector<std::string> sets{set("parallel.dp", n(l.dp)), set("parallel.tp", n(l.tp)), set("parallel.pp", n(l.pp)),
                                set("parallel.ep", n(l.ep)), set("parallel.schedule", schedule)};
  sets.push_back(set("parallel.vpp", n(l.scheduled() && l.schedule == pipeline::Kind::interleaved ? l.vpp : 1)));
  sets.push_back(set("parallel.zero", n(l.zero)));
  sets.push_back(set("parallel.sequence_parallel", l.sp ? "true" : "false"));
  sets.push_back(set("training.micro_batch", n(l.micro_batch)));
  sets.push_back(set("training.recompute", name_of(l.recompute)));
  // The planner times BF16 GEMMs unless the layout is FP8.
  sets.push_back(set("precision.matmul", l.fp8 ? "fp8" : "bf16"));
  return sets;
}

std::string train_set_line(const Layout& l) {
  std::string out;
  for (const std::string& s : train_sets(l)) out += (out.empty() ? "--set " : " --set ") + s;
  return out;
}

double fp8_code_bytes(const Fp8Config& f) {
  if (!f.fused_codes || f.scaling == Fp8Scaling::tensor) return 0;
  return 1 + 4.0 / f.tile;  // a byte per code, a float scale per 1 x tile piece
}

Layout layout_of_config(const Config& c) {
  const ParallelConfig& p = c.parallel;
  Layout l;
  l.dp = p.dp;
  l.tp = p.tp;
  l.pp = p.pp;
  l.ep = p.ep;
  l.ep_receive_bound = p.ep_receive_bound;
  l.vpp = p.vpp;
  l.zero = p.zero;
  l.sp = p.sequence_parallel;
  l.schedule = p.schedule;
  l.micro_batch = c.training.micro_batch;
  l.recompute = c.training.recompute;
  l.fp8 = c.precision.matmul == MatmulPrecision::fp8;
  l.fp8_code_bytes = l.fp8 ? fp8_code_bytes(c.fp8) : 0;
  return l;
}

RankCoords coords_of(const ParallelLayout& l, int rank) {
  RankCoords c;
  c.rank = rank;
  c.tp = rank % l.tp;
  c.dp = rank / l.tp % l.dp;
  c.pp = rank / l.stage_ranks();
  const int s = c.tp + l.tp * c.dp;
  c.ep = s % l.ep;
  c.ep_group = s / l.ep;
  return c;
}

std::string placement_text(const ParallelLayout& l, int n_experts) {
  std::string out;
  const int per = n_experts / l.ep;
  // A big job lists its first ranks; the formula gives the rest.
  const int shown = l.world() <= 64 ? l.world() : 16;
  for (int r = 0; r < shown; ++r) {
    const RankCoords c = coords_of(l, r);
    char line[160];
    std::snprintf(line, sizeof line, "  rank %3d: tp %d dp %d pp %d ep %d (experts %d-%d)\n", r, c.tp, c.dp, c.pp, c.ep,
                  c.ep * per, (c.ep + 1) * per - 1);
    out += line;
  }
  if (shown < l.world())
    out += "  ... " + std::to_string(l.world() - shown) + " more: rank = tp + tp_size * (dp + dp_size * pp)\n";
  return out;
}

}  // namespace mt
