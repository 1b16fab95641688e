#include "ops/backend/capture_check.hpp"

#include <algorithm>
#include <map>

namespace mt {

namespace {

const char* round_trip_name(int kind) {
  switch (kind) {
    case kTraceDownload: return "download";
    case kTraceSync: return "host sync";
    case kTraceAllocation: return "allocation";
    default: return "?";
  }
}

// Each stream's ops in their order: streams run apart, so only the order within one is fixed.
std::map<const DeviceState*, std::vector<const TraceOp*>> by_stream(const Region& r) {
  std::map<const DeviceState*, std::vector<const TraceOp*>> out;
  for (const TraceOp& op : r.trace)
    if (op.kind >= 0) out[op.stream].push_back(&op);
  return out;
}

class Problems {
 public:
  Problems(CaptureReport& report, size_t most) : report_(report), most_(most) {}
  void add(std::string text, const std::string& cause) {
    ++report_.causes[cause];
    if (report_.problems.size() < most_) report_.problems.push_back(std::move(text));
    else ++report_.more;
  }

 private:
  CaptureReport& report_;
  size_t most_;
};

// The round trips of one region; what came just before each says where it was.
void check_round_trips(const Region& r, const std::string& where, const CaptureRules& rules, CaptureReport& report,
                       Problems& problems) {
  const TraceOp* last_op = nullptr;
  for (const TraceOp& op : r.trace) {
    if (op.kind >= 0) {
      last_op = &op;
      continue;
    }
    const bool in_pass = r.name != rules.step_region;
    if (op.kind == kTraceDownload && in_pass) ++report.downloads;
    if (op.kind == kTraceDownload && in_pass && rules.exchange_downloads) continue;
    const std::string after = last_op ? std::string(" after ") + op_kind_name(last_op->kind) : " before any op";
    const std::string size =
        op.kind == kTraceSync ? "" : " of " + std::to_string(op.words.empty() ? 0 : op.words[0]) + " bytes";
    problems.add(where + ": " + round_trip_name(op.kind) + size + "," + after, round_trip_name(op.kind) + after);
  }
}

void check_same_ops(const Region& was, const Region& r, const std::string& where, Problems& problems) {
  const auto a = by_stream(was), b = by_stream(r);
  if (a.size() != b.size()) {
    problems.add(where + ": ops on " + std::to_string(b.size()) + " stream(s), " + std::to_string(a.size()) +
                 " the step before", "another number of streams");
    return;
  }
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    const auto &x = ia->second, &y = ib->second;
    if (ia->first != ib->first)
      return problems.add(where + ": ops on another stream than the step before", "another stream");
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (*x[i] == *y[i]) continue;
      return problems.add(where + ": op " + std::to_string(i + 1) + " is " + trace_op_text(*y[i]) +
                              ", the step before " + trace_op_text(*x[i]),
                          std::string("other arguments: ") + op_kind_name(y[i]->kind));
    }
    if (x.size() != y.size())
      return problems.add(where + ": " + std::to_string(y.size()) + " ops, " + std::to_string(x.size()) +
                              " the step before",
                          "another number of ops");
  }
}

}  // namespace

std::string trace_op_text(const TraceOp& op) {
  std::string s = op_kind_name(op.kind);
  s += "(";
  for (size_t i = 0; i < op.words.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(op.words[i]);
  }
  return s + ")";
}

CaptureReport check_capture(const std::vector<Region>& before, const std::vector<Region>& now, long long step,
                            const CaptureRules& rules) {
  CaptureReport report;
  Problems problems(report, rules.most_problems);
  const std::string at = "step " + std::to_string(step);
  for (const Region& r : now) check_round_trips(r, at + ", " + r.name, rules, report, problems);
  if (before.empty()) return report;
  if (rules.exchange_downloads) {
    CaptureReport was;
    Problems ignored(was, 0);
    for (const Region& r : before) check_round_trips(r, "", rules, was, ignored);
    if (was.downloads != report.downloads)
      problems.add(at + ": " + std::to_string(report.downloads) + " downloads inside the passes, " +
                       std::to_string(was.downloads) + " the step before",
                   "another number of downloads");
    return report;
  }
  if (before.size() != now.size()) {
    problems.add(at + ": " + std::to_string(now.size()) + " regions, " + std::to_string(before.size()) +
                     " the step before",
                 "another number of passes");
    return report;
  }
  for (size_t i = 0; i < now.size(); ++i) {
    const std::string where = at + ", " + now[i].name;
    if (now[i].name != before[i].name)
      problems.add(where + ": in place of " + before[i].name + " the step before", "passes in another order");
    else check_same_ops(before[i], now[i], where, problems);
    if (now[i].name == rules.step_region)
      for (const TraceOp& op : now[i].trace)
        if (op.kind >= 0) ++report.step_ops[op_kind_name(op.kind)];
  }
  return report;
}

}  // namespace mt
