// The device counters: every Backend call counted once, alike on cpu and cpu-strict; regions and
// their traces; the capture check catching what a CUDA graph could not replay.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/device_comm.hpp"
#include "comm/staged_comm.hpp"
#include "ops/backend/capture_check.hpp"
#include "ops/backend/op_profile.hpp"
#include "tensor/buffer.hpp"

namespace {

struct Strict {
  mt::Backend b = mt::cpu_strict_backend_create();
  ~Strict() { mt::cpu_strict_backend_destroy(b); }
};

long long launches(const mt::Counts& c, const char* kind) {
  for (int k = 0; k < mt::op_kind_count(); ++k)
    if (std::string(mt::op_kind_name(k)) == kind) return c.ops.at(size_t(k));
  FAIL("no op kind " << kind);
  return -1;
}

// One call of each counted kind, through a copy of `be` (copies share the counters).
void one_of_each(const mt::Backend& be) {
  const mt::Backend copy = be;
  mt::Buffer x(copy, mt::DType::f32, 64, mt::Unfilled{});
  mt::Buffer y(copy, mt::DType::f32, 64, mt::Unfilled{});
  x.from_host(std::vector<float>(64, 1.0f));
  copy.zero(y.raw(), y.bytes());
  copy.add({.n = 64, .x = x.f32(), .y = y.f32()});
  copy.gemm({.m = 8, .n = 8, .k = 8, .a = x.f32(), .b = x.f32(), .c = y.f32()});
  CHECK(y.to_host_f32()[0] == 8.0f);
  copy.scale({.n = 64, .factor = 2.0f, .x = x.f32()});
  float two[2] = {};
  copy.download(two, x.f32(), sizeof two);
  CHECK(two[1] == 2.0f);
  copy.synchronize();
  void* m0 = copy.mark_create();
  void* m1 = copy.mark_create();
  copy.mark_record(m0);
  copy.mark_record(m1);
  copy.mark_seconds(m0, m1);  // waits for the device: a host sync
  copy.mark_destroy(m0);
  copy.mark_destroy(m1);
}

void check_counts(const mt::Counts& c) {
  CHECK(c.allocations.count == 2);
  CHECK(c.allocations.bytes == 2 * 64 * 4);
  CHECK(c.releases == 2);
  CHECK(c.uploads.count == 1);
  CHECK(c.uploads.bytes == 64 * 4);
  CHECK(c.downloads.count == 2);
  CHECK(c.downloads.bytes == 64 * 4 + 8);
  CHECK(c.syncs == 2);
  CHECK(launches(c, "zero") == 1);
  CHECK(launches(c, "add") == 1);
  CHECK(launches(c, "gemm") == 1);
  CHECK(launches(c, "scale") == 1);
  CHECK(launches(c, "copy") == 0);
  CHECK(c.op_launches() == 4);
}

mt::GemmArgs gemm_of(int m) {
  mt::GemmArgs g{.m = m, .n = 4, .k = 4};
  g.a = reinterpret_cast<const float*>(0x1000);
  g.b = reinterpret_cast<const float*>(0x2000);
  g.c = reinterpret_cast<float*>(0x3000);
  return g;
}

// A step's regions as the trainer makes them: one pass, then the step's own region around it.
std::vector<mt::Region> step_regions(mt::DeviceCounters& c, const mt::Backend& be, int m, bool download,
                                     bool allocate) {
  c.begin_region("step");
  {
    const mt::CountedRegion pass(&c, "forward chunk 0 mb 0");
    c.op(mt::op_kind_gemm, be.state, mt::arg_words(gemm_of(m)));
    if (download) c.download(8);
    if (allocate) c.allocation(256);
    c.op(mt::op_kind_add, be.state, mt::arg_words(mt::AddArgs{.n = 16}));
  }
  c.op(mt::op_kind_adamw, be.state, mt::arg_words(mt::AdamwArgs{.n = 16}));
  c.end_region();
  return c.take_regions();
}

}  // namespace

TEST_CASE("counters: every call through a Backend is counted once, the same on cpu and cpu-strict") {
  Strict strict;
  for (mt::Backend be : {mt::cpu_backend(), strict.b}) {
    CAPTURE(be.ops->name);
    mt::DeviceCounters counters;
    be.counters = &counters;
    one_of_each(be);
    check_counts(counters.total());
  }
}

TEST_CASE("counters: a profiled backend counts each call once, where it enters") {
  mt::DeviceCounters counters;
  mt::Backend inner = mt::cpu_backend();
  inner.counters = &counters;
  mt::OpProfile profile(inner);
  one_of_each(profile.backend());
  check_counts(counters.total());
}

TEST_CASE("counters: the staged communicator's copies are counted apart from the device's") {
  Strict strict;
  mt::DeviceCounters counters;
  mt::Backend be = strict.b;
  be.counters = &counters;
  auto host = mt::make_local_comm();
  auto comm = mt::make_staged_comm(*host, be);
  mt::Buffer x(be, mt::DType::f32, 32, mt::Unfilled{});
  x.from_host(std::vector<float>(32, 2.0f));
  const mt::Counts before = counters.total();
  comm->all_reduce_sum(mt::device_span(x));
  const mt::Counts step = counters.total() - before;
  CHECK(step.downloads.count == 0);
  CHECK(step.uploads.count == 0);
  const mt::Counts staged = counters.staging().total();
  CHECK(staged.downloads.count == 1);
  CHECK(staged.uploads.count == 1);
  CHECK(staged.downloads.bytes == 32 * 4);
}

TEST_CASE("counters: regions take the counts between their ends, nested, and trace their own ops") {
  mt::DeviceCounters counters;
  const mt::Backend be = mt::cpu_backend();
  counters.op(mt::op_kind_add, be.state);  // before any region: counted, in no region
  CHECK(counters.take_regions().empty());
  counters.record_regions(true, true);
  const std::vector<mt::Region> r = step_regions(counters, be, 4, true, false);
  REQUIRE(r.size() == 2);
  CHECK(r[0].name == "forward chunk 0 mb 0");
  CHECK(r[0].counts.op_launches() == 2);
  CHECK(r[0].counts.downloads.count == 1);
  CHECK(r[0].trace.size() == 3);  // gemm, the download, add
  CHECK(r[0].trace[1].kind == mt::kTraceDownload);
  CHECK(r[1].name == "step");
  CHECK(r[1].counts.op_launches() == 3);  // the pass's included
  CHECK(r[1].trace.size() == 1);          // adamw: the pass traced its own
  CHECK(counters.total().op_launches() == 4);
}

TEST_CASE("counters: argument words hold every field, never the padding between them") {
  mt::GemmArgs a, b;
  std::memset(static_cast<void*>(&a), 0x00, sizeof a);
  std::memset(static_cast<void*>(&b), 0xff, sizeof b);
  for (mt::GemmArgs* g : {&a, &b}) *g = gemm_of(16);
  a.trans_a = b.trans_a = true;
  CHECK(mt::arg_words(a) == mt::arg_words(b));
  b.alpha = 0.5f;
  CHECK(mt::arg_words(a) != mt::arg_words(b));
  b = a;
  b.fp8.b = mt::Fp8Operand::gradient;  // a nested struct's field counts too
  CHECK(mt::arg_words(a) != mt::arg_words(b));
  CHECK(mt::arg_words(mt::AddArgs{.n = 3}) == std::vector<uint64_t>{3, 0, 0, 0});
}

TEST_CASE("capture check: identical steps pass; a planted download, allocation or size change fails") {
  mt::DeviceCounters counters;
  counters.record_regions(true, true);
  const mt::Backend be = mt::cpu_backend();
  const std::vector<mt::Region> first = step_regions(counters, be, 4, false, false);
  CHECK(mt::check_capture({}, first, 1).ok());
  CHECK(mt::check_capture(first, step_regions(counters, be, 4, false, false), 2).ok());

  const mt::CaptureReport downloaded = mt::check_capture(first, step_regions(counters, be, 4, true, false), 2);
  REQUIRE(downloaded.problems.size() == 1);
  CHECK(downloaded.problems[0] == "step 2, forward chunk 0 mb 0: download of 8 bytes, after gemm");
  CHECK(downloaded.downloads == 1);

  const mt::CaptureReport allocated = mt::check_capture(first, step_regions(counters, be, 4, false, true), 2);
  REQUIRE(allocated.problems.size() == 1);
  CHECK(allocated.problems[0].find("allocation of 256 bytes, after gemm") != std::string::npos);

  const mt::CaptureReport resized = mt::check_capture(first, step_regions(counters, be, 8, false, false), 3);
  REQUIRE(resized.problems.size() == 1);
  CHECK(resized.problems[0].rfind("step 3, forward chunk 0 mb 0: op 1 is gemm(8 4 4", 0) == 0);

  // Expert parallelism's exchange: downloads allowed, as many each step.
  const mt::CaptureRules ep{.exchange_downloads = true};
  const std::vector<mt::Region> with = step_regions(counters, be, 4, true, false);
  CHECK(mt::check_capture(with, step_regions(counters, be, 8, true, false), 2, ep).ok());
  // ... in the passes only: the step's own region may not download.
  counters.begin_region("step");
  counters.download(8);
  counters.end_region();
  const mt::CaptureReport outside = mt::check_capture(with, counters.take_regions(), 2, ep);
  REQUIRE(outside.problems.size() == 2);
  CHECK(outside.problems[0] == "step 2, step: download of 8 bytes, before any op");
  const mt::CaptureReport fewer = mt::check_capture(with, step_regions(counters, be, 4, false, false), 2, ep);
  REQUIRE(fewer.problems.size() == 1);
  CHECK(fewer.problems[0] == "step 2: 0 downloads inside the passes, 1 the step before");
}
