// Leave-one-source-out: refit each fitted efficiency without the source left out, predict that
// source's runs with the refitted numbers.
#include "plan/source_holdout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "util/format.hpp"

namespace mt::plan {

namespace {

double& efficiency(Cluster& c, bool fp8) { return fp8 ? c.matmul_efficiency_fp8 : c.matmul_efficiency_bf16; }

// The run's error with its profile's efficiencies replaced where `values` names them (by
// profile path and precision).
using Values = std::map<std::pair<std::string, bool>, double>;
// `scale` multiplies both efficiencies (a software factor fitted again).
double error_with(const PublishedRun& r, const Values& values, double scale = 1) {
  Cluster c = r.cluster;
  for (bool fp8 : {false, true}) {
    if (auto it = values.find({c.path, fp8}); it != values.end()) efficiency(c, fp8) = it->second;
    efficiency(c, fp8) *= scale;
  }
  return estimate_step(r.model, r.global_batch, c, r.layout).step_s / r.step_s - 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// A faster matmul never slows a step: the median log error falls as x rises, so bisect it (in log
// space, to a relative 1e-4) between low and high.
template <class Error>
double bisect_median(const std::vector<const PublishedRun*>& runs, double low, double high, Error error) {
  auto median_log_error = [&](double x) {
    std::vector<double> e;
    for (const PublishedRun* r : runs) e.push_back(std::log1p(error(*r, x)));
    return median(e);
  };
  double lo = std::log(low), hi = std::log(high);
  if (median_log_error(high) > 0) return high;
  while (hi - lo > 1e-4) {
    const double mid = (lo + hi) / 2;
    (median_log_error(std::exp(mid)) > 0 ? lo : hi) = mid;
  }
  return std::exp((lo + hi) / 2);
}

}  // namespace

double fit_efficiency(const std::vector<const PublishedRun*>& runs, bool fp8) {
  return bisect_median(runs, 0.01, 1, [&](const PublishedRun& r, double x) {
    return error_with(r, {{{r.cluster.path, fp8}, x}});
  });
}

double fit_software_factor(const std::vector<const PublishedRun*>& runs, double shipped) {
  return bisect_median(runs, 0.1, 1.5, [&](const PublishedRun& r, double x) { return error_with(r, {}, x / shipped); });
}

namespace {

std::vector<FittedNumber> fitted_numbers(const std::vector<PublishedRun>& runs) {
  std::vector<FittedNumber> out;
  for (const PublishedRun& r : runs) {
    if (!r.calibration) continue;
    auto same = [&](const FittedNumber& f) { return f.profile == r.cluster.path && f.fp8 == r.layout.fp8; };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) {
      const double shipped = r.layout.fp8 ? r.cluster.matmul_efficiency_fp8 : r.cluster.matmul_efficiency_bf16;
      out.push_back({r.cluster.path, r.layout.fp8, shipped, 0, {}});
      it = out.end() - 1;
    }
    it->runs.push_back(&r);
  }
  for (FittedNumber& f : out) f.refit = fit_efficiency(f.runs, f.fp8);
  return out;
}

// f fitted without `origin`: to its other calibration runs, else to the profile's other runs in
// that precision, else (no run of another source on the profile) the median of the other profiles'
// fitted values. `how` says which.
double refit_without(const FittedNumber& f, const std::string& origin, const std::vector<PublishedRun>& runs,
                     const std::vector<FittedNumber>& all, std::string& how) {
  std::vector<const PublishedRun*> kept;
  for (const PublishedRun* r : f.runs)
    if (r->origin != origin) kept.push_back(r);
  if (!kept.empty()) {
    how = "its " + std::to_string(kept.size()) + " calibration runs of other sources";
    return fit_efficiency(kept, f.fp8);
  }
  for (const PublishedRun& r : runs)
    if (r.origin != origin && r.cluster.path == f.profile && r.layout.fp8 == f.fp8) kept.push_back(&r);
  if (!kept.empty()) {
    how = "the profile's " + std::to_string(kept.size()) + " other runs in this precision";
    return fit_efficiency(kept, f.fp8);
  }
  std::vector<double> others;
  for (const FittedNumber& g : all)
    if (g.fp8 == f.fp8 && g.profile != f.profile) others.push_back(g.shipped);
  how = "no run of another source on the profile: the median of the " + std::to_string(others.size()) +
        " other profiles' fitted " + f.key();
  return others.empty() ? f.shipped : median(others);
}

// Per trainer whose profile sets matmul_factor: its runs and the factor fitted to them.
std::vector<SoftwareFit> software_fits(const std::vector<PublishedRun>& runs) {
  std::vector<SoftwareFit> out;
  for (const PublishedRun& r : runs) {
    if (r.cluster.software_matmul_factor == 1) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const SoftwareFit& f) { return f.trainer == r.trainer; });
    if (it == out.end()) it = out.insert(out.end(), {r.trainer, r.cluster.software_matmul_factor, 0, {}});
    it->runs.push_back(&r);
  }
  for (SoftwareFit& f : out) f.refit = fit_software_factor(f.runs, f.shipped);
  return out;
}

// The factor of each trainer with runs of `origin`, fitted again to its runs of other sources
// (none: 1, the cluster profile's kernels), as a scale on the shipped factor.
std::map<std::string, double> software_scales(const SourceHoldout& h, const std::string& origin,
                                              std::vector<std::string>& refits) {
  std::map<std::string, double> scales;
  for (const SoftwareFit& f : h.software) {
    std::vector<const PublishedRun*> kept;
    for (const PublishedRun* r : f.runs)
      if (r->origin != origin) kept.push_back(r);
    if (kept.size() == f.runs.size()) continue;
    const double v = kept.empty() ? 1 : fit_software_factor(kept, f.shipped);
    scales[f.trainer] = v / f.shipped;
    refits.push_back(origin + " left out: " + f.trainer + ".toml matmul_factor" + format_number(" %.3f", v) +
                     format_number(" (shipped %.3f), from ", f.shipped) + std::to_string(kept.size()) +
                     " runs of the trainer's other sources");
  }
  return scales;
}

}  // namespace

SourceHoldout leave_one_source_out(const std::vector<PublishedRun>& runs) {
  SourceHoldout h;
  h.fitted = fitted_numbers(runs);
  h.software = software_fits(runs);
  h.runs.resize(runs.size());
  std::vector<std::string> origins;
  for (const PublishedRun& r : runs)
    if (std::find(origins.begin(), origins.end(), r.origin) == origins.end()) origins.push_back(r.origin);
  for (const std::string& origin : origins) {
    Values values;
    for (const FittedNumber& f : h.fitted) {
      if (std::none_of(f.runs.begin(), f.runs.end(), [&](const PublishedRun* r) { return r->origin == origin; }))
        continue;
      std::string how;
      const double v = refit_without(f, origin, runs, h.fitted, how);
      values[{f.profile, f.fp8}] = v;
      h.refits.push_back(origin + " left out: " + file_name(f.profile) + " " + f.key() + format_number(" %.3f", v) +
                         format_number(" (shipped %.3f), from ", f.shipped) + how);
    }
    const std::map<std::string, double> scales = software_scales(h, origin, h.refits);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].origin != origin) continue;
      const auto it = scales.find(runs[i].trainer);
      h.runs[i].error = error_with(runs[i], values, it == scales.end() ? 1 : it->second);
    }
  }
  return h;
}

namespace {

// "16 runs  within 20%:  14 of  16  median error  -3.1%"
std::string figures_text(const std::vector<double>& errors) {
  const auto within = std::count_if(errors.begin(), errors.end(), [](double e) { return std::abs(e) <= 0.2; });
  char buf[120];
  std::snprintf(buf, sizeof buf, "%3zu runs  within 20%%: %3ld of %3zu  median error %+6.1f%%", errors.size(),
                long(within), errors.size(), 100 * median(errors));
  return buf;
}

}  // namespace

std::string holdout_report(const std::vector<CheckedRun>& in_sample, const SourceHoldout& h) {
  std::string out = "\nleave-one-source-out: each run predicted with every number fitted to its own source "
                    "(origin) fitted again without it\nfitted numbers (the median calibration run predicted "
                    "exactly; refit: the same fit done here):\n";
  for (const FittedNumber& f : h.fitted) {
    std::string origins;
    for (const PublishedRun* r : f.runs)
      if (origins.find(r->origin) == std::string::npos) origins += (origins.empty() ? "" : ", ") + r->origin;
    out += "  " + file_name(f.profile) + " " + f.key() + format_number(" %.3f", f.shipped) +
           format_number(" (refit %.3f) to ", f.refit) + std::to_string(f.runs.size()) + " runs of " + origins + "\n";
  }
  for (const SoftwareFit& f : h.software)
    out += "  " + f.trainer + ".toml matmul_factor" + format_number(" %.3f", f.shipped) +
           format_number(" (refit %.3f) to ", f.refit) + std::to_string(f.runs.size()) + " runs of the trainer\n";
  out += "not fitted again: activation_passes (fitted once with a100-selene.toml's matmul_bf16) and the BF16\n"
         "efficiencies other profiles derive from A100's fit; they keep their values, and so that source's part.\n";
  for (const std::string& r : h.refits) out += "  " + r + "\n";
  // Per family: in sample, then held out.
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> families;
  std::vector<double> all_in, all_out;
  for (size_t i = 0; i < in_sample.size(); ++i) {
    auto& [in, held] = families[family_of(*in_sample[i].run)];
    in.push_back(in_sample[i].error);
    held.push_back(h.runs[i].error);
    all_in.push_back(in_sample[i].error);
    all_out.push_back(h.runs[i].error);
  }
  out += "\nby family (trainer and accelerator): in sample | left out\n";
  size_t width = 3;
  for (const auto& f : families) width = std::max(width, f.first.size());
  auto line = [&](const std::string& label, const std::vector<double>& in, const std::vector<double>& held) {
    return label + std::string(width + 1 - label.size(), ' ') + figures_text(in) + " | " + figures_text(held) + "\n";
  };
  out += line("all", all_in, all_out);
  for (const auto& [name, v] : families) out += line(name, v.first, v.second);
  return out;
}

}  // namespace mt::plan
