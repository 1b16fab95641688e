// Every NcclComm call on one rank (a world of one, no mpirun): collectives of one, all-to-all-v
// and isend/irecv to itself, in f32, f64 and u8, on sub-communicators from split(), each against
// the result it must give exactly. Outputs are poisoned before each call, so an element NCCL never
// writes fails. Prints PASS/FAIL per check; exits 0 when all pass, 1 when one fails, 77 (skipped)
// when NCCL cannot be loaded or there is no usable GPU.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/comm.hpp"
#include "comm/nccl_comm.hpp"
#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/graph_capture.hpp"
#include "tensor/buffer.hpp"

using namespace mt;

namespace {

int failed = 0, passed = 0;

void report(const std::string& name, bool ok, const std::string& detail = "") {
  std::printf("%s %s%s\n", ok ? "PASS" : "FAIL", name.c_str(), ok || detail.empty() ? "" : (": " + detail).c_str());
  (ok ? passed : failed)++;
}

// Deterministic values that are neither zero nor poison; each check seeds its own.
template <class T>
std::vector<T> values(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (T& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    if constexpr (std::is_same_v<T, uint8_t>) x = T(1 + (s >> 33) % 200);
    else x = T(double(s >> 11) / double(1ull << 53) + 0.5);
  }
  return v;
}

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else return DType::u8;
}

// A device buffer holding `v`.
template <class T>
Buffer device(const Backend& gpu, const std::vector<T>& v) {
  Buffer b(gpu, dtype_of<T>(), v.size());
  b.upload(v.data(), v.size());
  return b;
}

// A device buffer of n elements, every byte 0xAB (NaN-free but far from any value sent).
template <class T>
Buffer poisoned(const Backend& gpu, size_t n) {
  std::vector<T> p(n);
  std::memset(p.data(), 0xAB, n * sizeof(T));
  return device(gpu, p);
}

template <class T>
std::vector<T> host(const Buffer& b) {
  std::vector<T> v(b.count());
  b.download(v.data(), v.size());
  return v;
}

// Whether `got` equals `want` bit for bit; the first difference otherwise.
template <class T>
std::string difference(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " elements, wanted " + std::to_string(want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return "element " + std::to_string(i) + " is " + std::to_string(double(got[i])) + ", wanted " +
             std::to_string(double(want[i]));
  return "";
}

template <class T>
void check(const std::string& name, const Buffer& b, const std::vector<T>& want) {
  const std::string d = difference(host<T>(b), want);
  report(name, d.empty(), d);
}

template <class T>
std::string type_name() {
  return std::is_same_v<T, float> ? "f32" : std::is_same_v<T, double> ? "f64" : "u8";
}

template <class T>
void sums(DeviceComm& c, const Backend& gpu, const std::string& where, uint64_t seed) {
  const std::string t = " " + type_name<T>() + where;
  const size_t n = 1000;
  const std::vector<T> x = values<T>(n, seed);
  {
    Buffer b = device(gpu, x);
    c.all_reduce_sum(device_span(b));
    check("all_reduce_sum" + t, b, x);  // a sum over one rank is the rank's own values
  }
  {
    Buffer b = device(gpu, x);
    c.iall_reduce_sum(device_span(b))->wait();
    check("iall_reduce_sum" + t, b, x);
  }
  {
    Buffer b = device(gpu, x), out = poisoned<T>(gpu, n);
    c.reduce_scatter_sum(device_span(b), device_span(out));
    check("reduce_scatter_sum" + t, out, x);
  }
}

template <class T>
void moves(DeviceComm& c, const Backend& gpu, const std::string& where, uint64_t seed) {
  const std::string t = " " + type_name<T>() + where;
  const size_t n = 777;
  const std::vector<T> x = values<T>(n, seed);
  {
    Buffer mine = device(gpu, x), all = poisoned<T>(gpu, n);
    c.all_gather(device_span(mine), device_span(all));
    check("all_gather" + t, all, x);
  }
  {
    // The receive buffer is larger than what arrives: the rest must stay as it was.
    Buffer send = device(gpu, x), recv = poisoned<T>(gpu, n + 5);
    std::vector<T> want = host<T>(recv);
    std::copy(x.begin(), x.begin() + 600, want.begin());
    c.iall_to_all_v(device_span(send), {600}, device_span(recv), {600})->wait();
    check("iall_to_all_v to itself" + t, recv, want);
  }
  {
    Buffer send = device(gpu, x), recv = poisoned<T>(gpu, n);
    const std::vector<T> untouched = host<T>(recv);
    c.all_to_all_v(device_span(send), {0}, device_span(recv), {0});
    check("all_to_all_v of nothing" + t, recv, untouched);
  }
  {
    // The receive is posted first, as a pipeline posts it; both go out together at the first wait.
    Buffer out = device(gpu, x), in = poisoned<T>(gpu, n);
    auto rx = c.irecv(device_span(in), 0);
    auto tx = c.isend(device_span(out), 0);
    rx->wait();
    tx->wait();
    check("irecv / isend to itself" + t, in, x);
  }
  {
    // Messages between a pair match in the order they were posted.
    const std::vector<T> y = values<T>(n, seed + 1);
    Buffer a = device(gpu, x), b = device(gpu, y), in_a = poisoned<T>(gpu, n), in_b = poisoned<T>(gpu, n);
    auto s1 = c.isend(device_span(a), 0);
    auto s2 = c.isend(device_span(b), 0);
    auto r1 = c.irecv(device_span(in_a), 0);
    auto r2 = c.irecv(device_span(in_b), 0);
    for (auto* r : {&s1, &s2, &r1, &r2}) (*r)->wait();
    const std::string d = difference(host<T>(in_a), x) + difference(host<T>(in_b), y);
    report("two isend / irecv in order" + t, d.empty(), d);
  }
}

void all_calls(DeviceComm& c, const Backend& gpu, const std::string& where, uint64_t seed) {
  sums<float>(c, gpu, where, seed);
  sums<double>(c, gpu, where, seed + 10);
  moves<float>(c, gpu, where, seed + 20);
  moves<double>(c, gpu, where, seed + 30);
  moves<uint8_t>(c, gpu, where, seed + 40);
}

// Misuse is reported with the rank, the group size and the call.
void misuse(DeviceComm& c, const Backend& gpu) {
  Buffer b = poisoned<float>(gpu, 10), out = poisoned<float>(gpu, 3);
  std::string what;
  try {
    c.reduce_scatter_sum(device_span(b), device_span(out));
  } catch (const std::logic_error& e) {
    what = e.what();
  }
  const bool named = what.find("rank 0 of 1") != std::string::npos && what.find("reduce_scatter_sum") != std::string::npos;
  report("misuse named (reduce_scatter_sum of 10 into 3)", named, what.empty() ? "no error" : what);
}

// A pass holding NCCL calls between two ops, run, captured and replayed as the trainer's passes are
// (training.cuda_graph under tensor parallelism): each run doubles x, and a sum over one rank keeps
// it, so four runs give 16 x exactly. While a pass replays, the communicator issues nothing: the
// graph holds its calls.
void graph_replay(const Backend& gpu) {
  GraphCapture graph;
  Backend capturing = gpu;
  capturing.graph = &graph;
  std::unique_ptr<Comm> world = make_local_comm();
  std::unique_ptr<DeviceComm> comm = make_nccl_comm(*world, capturing);
  const size_t n = 1000;
  std::vector<float> x = values<float>(n, 900);
  Buffer b = device(gpu, x);
  for (int run = 0; run < 4; ++run) {
    graph.begin(capturing, "pass");
    capturing.scale({.n = n, .factor = 2.0f, .x = b.f32()});
    comm->all_reduce_sum(device_span(b));
    comm->iall_reduce_sum(device_span(b))->wait();
    graph.end();
  }
  for (float& v : x) v *= 16;
  check("a pass with NCCL calls: run, captured, replayed twice", b, x);
  report("the pass was captured once and replayed twice", graph.captures() == 1 && graph.replays() == 2,
         std::to_string(graph.captures()) + " capture(s), " + std::to_string(graph.replays()) + " replay(s)");
}

}  // namespace

int main() {
  std::string why;
  if (!nccl_available(&why)) {
    std::printf("nccl_test: skipped: no NCCL (%s)\n", why.c_str());
    return 77;
  }
  if (!cuda_available(&why)) {
    std::printf("nccl_test: skipped: no GPU (%s)\n", why.c_str());
    return 77;
  }
  Backend gpu = cuda_backend_create(0);
  {
    std::unique_ptr<Comm> world = make_local_comm();
    std::unique_ptr<DeviceComm> comm = make_nccl_comm(*world, gpu);
    std::printf("nccl_test: NcclComm of %d rank on GPU 0\n", comm->size());
    all_calls(*comm, gpu, "", 1);
    // Two levels of split, as the tp/dp/ep/pp groups are made, each fully working.
    std::unique_ptr<DeviceComm> group = comm->split(0, 0);
    report("split: a group of one", group->size() == 1 && group->rank() == 0 && group->host().size() == 1);
    all_calls(*group, gpu, " (split)", 100);
    std::unique_ptr<DeviceComm> sub = group->split(7, 0);
    all_calls(*sub, gpu, " (split of a split)", 200);
    misuse(*comm, gpu);
    // A group on a second stream of the GPU, as each pipeline chunk's tp and ep groups are made.
    Backend second = cuda_backend_create(0);
    std::unique_ptr<DeviceComm> on_second = comm->split_on(second, 0, 0);
    all_calls(*on_second, second, " (split onto a second stream)", 400);
    on_second.reset();
    cuda_backend_destroy(second);
    // A pipeline group of one opens no ring links; its calls still work.
    open_ring_links(*group);
    all_calls(*group, gpu, " (after open_ring_links)", 500);
    // The parent keeps working after its children are gone.
    sub.reset();
    group.reset();
    sums<float>(*comm, gpu, " (after the splits are destroyed)", 300);
  }
  graph_replay(gpu);
  cuda_backend_destroy(gpu);
  std::printf("nccl_test: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
