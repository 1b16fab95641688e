#include "train/step_counters.hpp"

#include <cstdio>

namespace mt {

std::vector<long long> counter_row(const StepCounts& c) {
  const Counts& s = c.step;
  const Counts& g = c.staging;
  return {s.uploads.count,      s.uploads.bytes,     s.downloads.count,
          s.downloads.bytes,    s.syncs,             s.allocations.count,
          s.allocations.bytes,  s.releases,          s.op_launches(),
          g.uploads.count + g.downloads.count,       g.uploads.bytes + g.downloads.bytes,
          c.in_step.downloads.count, c.in_step.syncs, c.in_step.allocations.count};
}

std::vector<long long> op_launch_row(const StepCounts& c) {
  std::vector<long long> row = c.step.ops;
  row.resize(size_t(op_kind_count()), 0);
  return row;
}

StepCounters::StepCounters(DeviceCounters* device, bool check, const CaptureRules& rules)
    : device_(device), check_(check), rules_(rules) {
  if (device_) device_->record_regions(true, check_);
}

StepCounters::~StepCounters() {
  if (device_) device_->record_regions(false);
}

void StepCounters::begin_step() {
  if (!device_) return;
  device_->take_regions();  // what ran between steps (evaluations) is not the step's
  at_begin_ = device_->total();
  staging_at_begin_ = device_->staging().total();
  device_->begin_region("step");
  region_open_ = true;
}

void StepCounters::end_region() {
  if (!device_ || !region_open_) return;
  device_->end_region();
  region_open_ = false;
}

StepCounts StepCounters::end_step(long long step) {
  if (!device_) return {};
  end_region();
  std::vector<Region> regions = device_->take_regions();
  StepCounts c;
  c.step = device_->total() - at_begin_;
  c.staging = device_->staging().total() - staging_at_begin_;
  if (!regions.empty()) c.in_step = regions.back().counts;  // the step's own region closes last
  if (check_) {
    // The first step warms caches and arenas and finds which prepared weights the GEMMs read (made
    // after its update): the check compares the third step with the second, and so on.
    if (steps_ > 1) {
      const CaptureReport r = check_capture(last_regions_, regions, step, rules_);
      for (const std::string& p : r.problems) {
        if (capture_.problems.size() < rules_.most_problems) capture_.problems.push_back(p);
        else ++capture_.more;
      }
      capture_.more += r.more;
      capture_.downloads = r.downloads;
      capture_.causes = r.causes;  // the last step's
      capture_.step_ops = r.step_ops;
      ++checked_;
    }
    last_regions_ = std::move(regions);
  }
  if (profiled_.size() < 2) profiled_.push_back(c);
  else profiled_[1].step += c.step, profiled_[1].staging += c.staging, profiled_[1].in_step += c.in_step;
  ++steps_;
  return c;
}

namespace {

void line(std::string& out, const char* what, double first, double later, bool has_later) {
  char buf[120];
  if (has_later) std::snprintf(buf, sizeof buf, "  %-36s %14.0f %14.1f\n", what, first, later);
  else std::snprintf(buf, sizeof buf, "  %-36s %14.0f\n", what, first);
  out += buf;
}

}  // namespace

std::string StepCounters::profile_text() const {
  if (profiled_.empty()) return "";
  const StepCounts& a = profiled_[0];
  const bool later = profiled_.size() > 1;
  const StepCounts& b = later ? profiled_[1] : a;
  const double n = later ? double(steps_ - 1) : 1;
  std::string out;
  char head[160];
  std::snprintf(head, sizeof head, "counters  per step on the first rank's device: the first step%s\n",
                later ? (", then the mean of " + std::to_string(steps_ - 1) + " later step(s)").c_str() : "");
  out += head;
  const std::vector<long long> ra = counter_row(a), rb = counter_row(b);
  const char* const names[] = {"uploads",          "upload bytes",     "downloads",
                               "download bytes",   "host syncs",       "allocations",
                               "allocation bytes", "releases",         "all launches",
                               "comm staging copies", "comm staging bytes", "inside the step: downloads",
                               "inside the step: host syncs", "inside the step: allocations"};
  for (size_t i = 0; i < ra.size(); ++i) line(out, names[i], double(ra[i]), double(rb[i]) / n, later);
  const std::vector<long long> oa = op_launch_row(a), ob = op_launch_row(b);
  for (int k = 0; k < op_kind_count(); ++k)
    if (oa[size_t(k)] || ob[size_t(k)])
      line(out, (std::string("launches: ") + op_kind_name(k)).c_str(), double(oa[size_t(k)]),
           double(ob[size_t(k)]) / n, later);
  return out;
}

}  // namespace mt
