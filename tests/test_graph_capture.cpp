// GraphCapture on the strict CPU backend, whose graphs record the queued work and replay it: a
// pass over two streams is run, captured and replayed with new inputs, and gives the numbers a
// plain run gives; a replay that strays from its capture, or a pass that waits for the device,
// is refused.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/backend/graph_capture.hpp"
#include "tensor/buffer.hpp"

namespace {

constexpr size_t kN = 48;

struct TwoStreams {
  mt::Backend main = mt::cpu_strict_backend_create();
  mt::Backend side = mt::cpu_strict_stream_create(main);
  ~TwoStreams() {
    mt::cpu_strict_stream_destroy(side);
    mt::cpu_strict_backend_destroy(main);
  }
};

// One pass: y = 2 x + x * factor, the second term on the side stream, forked and joined by marks.
struct Pass {
  const mt::Backend& main;
  const mt::Backend& side;
  mt::Buffer x, y, z;
  void* fork;
  void* join;
  Pass(const mt::Backend& m, const mt::Backend& s)
      : main(m), side(s), x(m, mt::DType::f32, kN), y(m, mt::DType::f32, kN), z(m, mt::DType::f32, kN),
        fork(m.mark_create()), join(m.mark_create()) {}
  ~Pass() {
    main.mark_destroy(fork);
    main.mark_destroy(join);
  }
  void run(const std::vector<float>& input, float factor, size_t n = kN) {
    main.upload(x.raw(), input.data(), n * sizeof(float));
    main.mark_record(fork);
    side.mark_wait(fork);
    side.copy(z.raw(), x.raw(), n * sizeof(float));
    side.scale({.n = n, .factor = factor, .x = z.f32()});
    side.mark_record(join);
    main.zero(y.raw(), n * sizeof(float));
    main.add({.n = n, .x = x.f32(), .y = y.f32()});
    main.add({.n = n, .x = x.f32(), .y = y.f32()});
    main.mark_wait(join);
    main.add({.n = n, .x = z.f32(), .y = y.f32()});
  }
};

std::vector<float> input_of(int step) {
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = float(int(i % 11) - 5) * 0.25f + float(step);
  return v;
}

std::vector<float> expected(const std::vector<float>& in, float factor) {
  std::vector<float> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = (in[i] + in[i]) + in[i] * factor;
  return out;
}

}  // namespace

TEST_CASE("graph capture: warm-up, capture and replays give a plain run's numbers, over two streams") {
  TwoStreams dev;
  mt::GraphCapture graph;
  mt::DeviceCounters counters;
  mt::Backend main = dev.main, side = dev.side;
  for (mt::Backend* b : {&main, &side}) b->graph = &graph, b->counters = &counters;
  Pass pass(main, side);
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    const mt::Counts before = counters.total();
    const float factor = 1.5f;  // a captured argument: the same every step
    graph.begin(main, "forward chunk 0 mb 0");
    pass.run(input_of(step), factor);
    graph.end();
    const mt::Counts ran = counters.total() - before;
    CHECK(pass.y.to_host_f32() == expected(input_of(step), factor));
    // The capture queues the pass's six ops into the graph and launches it; a replay only launches.
    const long long launched = step == 0 ? 0 : 1;
    CHECK(ran.ops[size_t(mt::op_kind_graph_launch())] == launched);
    CHECK(ran.op_launches() == (step < 2 ? 6 : 0) + launched);
  }
  CHECK(graph.captures() == 1);
  CHECK(graph.replays() == 3);
}

TEST_CASE("graph capture: a replay whose ops differ from the capture's stops, naming the op") {
  TwoStreams dev;
  mt::GraphCapture graph;
  mt::Backend main = dev.main, side = dev.side;
  main.graph = side.graph = &graph;
  Pass pass(main, side);
  for (int step = 0; step < 2; ++step) {
    graph.begin(main, "backward chunk 0 mb 1");
    pass.run(input_of(step), 0.5f);
    graph.end();
  }
  graph.begin(main, "backward chunk 0 mb 1");
  try {
    pass.run(input_of(2), 0.5f, kN / 2);
    FAIL("a replay with other sizes ran");
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()) ==
          "training.cuda_graph: the replay of pass backward chunk 0 mb 1 differs from its capture: upload 1 has "
          "another destination or size than when captured");
  }
}

TEST_CASE("graph capture: a captured pass may not download, sync or allocate") {
  TwoStreams dev;
  mt::GraphCapture graph;
  mt::Backend main = dev.main;
  main.graph = &graph;
  mt::Buffer x(main, mt::DType::f32, kN);
  for (int step = 0; step < 2; ++step) {
    graph.begin(main, "forward chunk 0 mb 0");
    if (step == 0) {
      main.scale({.n = kN, .factor = 2.0f, .x = x.f32()});  // the warm-up runs as it is
      graph.end();
      continue;
    }
    CHECK_THROWS_WITH_AS(x.to_host_f32(), doctest::Contains("a download inside"), std::logic_error);
    CHECK_THROWS_WITH_AS(main.alloc(64), doctest::Contains("an allocation inside"), std::logic_error);
    CHECK_THROWS_WITH_AS(main.synchronize(), doctest::Contains("a host sync inside"), std::logic_error);
    graph.end();
  }
}
