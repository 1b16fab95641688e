// Every StagedComm call under mpirun, on device buffers of the strict CPU backend (any host touch
// of them would be a SIGSEGV, so the staging through download/upload is proven) and of the plain
// CPU backend (the pointers go to MPI as they are). Rank 0 prints one PASS or FAIL line per call
// and backend. Run with 3 or more ranks.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/mpi_comm.hpp"
#include "comm/staged_comm.hpp"
#include "mpi/report.hpp"
#include "tensor/buffer.hpp"

using mt::Buffer;
using mt::DType;
using mt::device_span;

namespace {

Buffer f32_buffer(const mt::Backend& be, const std::vector<float>& v) {
  Buffer b(be, DType::f32, v.size());
  b.from_host(v);
  return b;
}

std::vector<uint8_t> bytes_of(const Buffer& b) {
  std::vector<uint8_t> out(b.count());
  b.download(out.data(), out.size());
  return out;
}

// Rank r sends q+1 values r*100+q to rank q, so it receives r+1 values q*100+r from each q.
struct VExchange {
  std::vector<float> send;
  std::vector<int> send_counts, recv_counts;
  VExchange(int r, int n) : send_counts(n), recv_counts(n, r + 1) {
    for (int q = 0; q < n; ++q) {
      send_counts[q] = q + 1;
      for (int k = 0; k <= q; ++k) send.push_back(float(r * 100 + q));
    }
  }
  static bool arrived(const std::vector<float>& recv, int r, int n) {
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (int k = 0; k <= r; ++k) ok = ok && recv[q * (r + 1) + k] == float(q * 100 + r);
    return ok;
  }
};

void run_all(mt::Comm& world, const mt::Backend& be, const std::string& backend_name) {
  const auto dc = mt::make_staged_comm(world, be);
  mt::DeviceComm& c = *dc;
  const int r = c.rank(), n = c.size();
  auto check = [&](const std::string& call, bool ok) { report(world, "staged " + call + " [" + backend_name + "]", ok); };

  {
    Buffer v = f32_buffer(be, {float(r), 1.0f});
    c.all_reduce_sum(device_span(v));
    const std::vector<float> h = v.to_host_f32();
    check("all_reduce_sum (f32)", h[0] == float(n * (n - 1) / 2) && h[1] == float(n));
  }
  {
    Buffer v(be, DType::f64, 1);
    v.from_host(std::vector<double>{0.5 * r});
    c.all_reduce_sum(device_span(v));
    check("all_reduce_sum (f64)", v.to_host_f64()[0] == 0.5 * n * (n - 1) / 2);
  }
  {
    Buffer v = f32_buffer(be, std::vector<float>(3, float(r + 1)));
    c.iall_reduce_sum(device_span(v))->wait();
    const std::vector<float> h = v.to_host_f32();
    check("iall_reduce_sum", h[0] == float(n * (n + 1) / 2) && h[2] == float(n * (n + 1) / 2));
  }
  {
    // Rank r contributes block b filled with r*10+b; block `rank` of the sum is sum_r (r*10+rank).
    std::vector<float> data(2 * n);
    for (int b = 0; b < n; ++b) data[2 * b] = data[2 * b + 1] = float(r * 10 + b);
    Buffer in = f32_buffer(be, data), out(be, DType::f32, 2);
    c.reduce_scatter_sum(device_span(in), device_span(out));
    const std::vector<float> h = out.to_host_f32();
    const float want = float(10 * n * (n - 1) / 2 + n * r);
    check("reduce_scatter_sum", h[0] == want && h[1] == want);
  }
  {
    Buffer mine = f32_buffer(be, {float(r), float(-r)}), all(be, DType::f32, 2 * size_t(n));
    c.all_gather(device_span(mine), device_span(all));
    const std::vector<float> h = all.to_host_f32();
    bool ok = true;
    for (int q = 0; q < n; ++q) ok = ok && h[2 * q] == float(q) && h[2 * q + 1] == float(-q);
    check("all_gather", ok);
  }
  {
    // Bytes (bfloat16 rows travel so) arrive as they left, a NaN's payload included; a block of
    // bytes that is not whole 4-byte words is refused.
    const uint8_t nan_payload[4] = {0x01, 0x00, 0xC0, 0x7F};
    std::vector<uint8_t> bytes(8);
    for (int i = 0; i < 4; ++i) bytes[size_t(i)] = uint8_t(r * 16 + i), bytes[size_t(4 + i)] = nan_payload[i];
    Buffer mine(be, DType::u8, 8), all(be, DType::u8, 8 * size_t(n));
    mine.upload(bytes.data(), 8);
    c.all_gather(device_span(mine), device_span(all));
    std::vector<uint8_t> h(8 * size_t(n));
    all.download(h.data(), h.size());
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 4; ++i) ok = ok && h[size_t(8 * q + i)] == uint8_t(q * 16 + i) && h[size_t(8 * q + 4 + i)] == nan_payload[i];
    bool refused = false;
    try {
      c.all_gather({mine.raw(), 6, DType::u8}, {all.raw(), 6 * size_t(n), DType::u8});
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    check("all_gather of bytes", ok && refused);
  }
  {
    Buffer send, recv(be, DType::f32, size_t(n) * (r + 1));
    std::unique_ptr<mt::Request> exchange;
    {  // the count vectors are gone before the wait: the request keeps what it needs
      const VExchange x(r, n);
      send = f32_buffer(be, x.send);
      exchange = c.iall_to_all_v(device_span(send), x.send_counts, device_span(recv), x.recv_counts);
    }
    exchange->wait();
    check("iall_to_all_v (f32)", VExchange::arrived(recv.to_host_f32(), r, n));
    const VExchange x(r, n);
    Buffer again(be, DType::f32, size_t(n) * (r + 1));
    c.all_to_all_v(device_span(send), x.send_counts, device_span(again), x.recv_counts);
    check("all_to_all_v (f32)", VExchange::arrived(again.to_host_f32(), r, n));
  }
  {
    // Bytes in blocks of odd lengths (FP8 codes): rank r sends q+1 bytes r*16+q to rank q.
    const VExchange x(r, n);
    std::vector<uint8_t> send;
    for (int q = 0; q < n; ++q) send.insert(send.end(), size_t(q + 1), uint8_t(r * 16 + q));
    Buffer s(be, DType::u8, send.size()), recv(be, DType::u8, size_t(n) * (r + 1));
    s.upload(send.data(), send.size());
    c.iall_to_all_v(device_span(s), x.send_counts, device_span(recv), x.recv_counts)->wait();
    const std::vector<uint8_t> h = bytes_of(recv);
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (int k = 0; k <= r; ++k) ok = ok && h[size_t(q * (r + 1) + k)] == uint8_t(q * 16 + r);
    check("iall_to_all_v (u8, odd blocks)", ok);
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  {
    // A ring: blocking send to the right would deadlock, so even ranks send first.
    Buffer out = f32_buffer(be, {float(r)}), in(be, DType::f32, 1);
    if (r % 2 == 0) {
      c.send(device_span(out), right);
      c.recv(device_span(in), left);
    } else {
      c.recv(device_span(in), left);
      c.send(device_span(out), right);
    }
    check("send / recv", in.to_host_f32()[0] == float(left));
  }
  {
    Buffer out = f32_buffer(be, {float(r), float(2 * r)}), in(be, DType::f32, 2);
    auto rx = c.irecv(device_span(in), left);
    auto tx = c.isend(device_span(out), right);
    tx->wait();
    rx->wait();
    const std::vector<float> h = in.to_host_f32();
    check("isend / irecv (f32)", h[0] == float(left) && h[1] == float(2 * left));
  }
  {
    const std::vector<uint8_t> mine{uint8_t(r), uint8_t(r + 50), uint8_t(r + 100)};
    Buffer out(be, DType::u8, 3), in(be, DType::u8, 3);
    out.upload(mine.data(), 3);
    auto rx = c.irecv(device_span(in), left);
    auto tx = c.isend(device_span(out), right);
    tx->wait();
    rx->wait();
    check("isend / irecv (u8, 3 bytes)", bytes_of(in) == std::vector<uint8_t>{uint8_t(left), uint8_t(left + 50),
                                                                                uint8_t(left + 100)});
  }
  {
    // Two messages to the same rank match in the order they were posted (no tags, as in NCCL);
    // the receives are posted before the sends, as a pipeline posts them.
    Buffer a = f32_buffer(be, {float(r)}), b = f32_buffer(be, {float(100 + r)});
    Buffer in_a(be, DType::f32, 1), in_b(be, DType::f32, 1);
    auto r1 = c.irecv(device_span(in_a), left);
    auto r2 = c.irecv(device_span(in_b), left);
    auto s1 = c.isend(device_span(a), right);
    auto s2 = c.isend(device_span(b), right);
    for (auto* q : {&s1, &s2, &r2, &r1}) (*q)->wait();
    check("two isend / irecv in order", in_a.to_host_f32()[0] == float(left) &&
                                            in_b.to_host_f32()[0] == float(100 + left));
  }
  {
    // Even and odd ranks form two groups; each sums its members' ranks on the device.
    auto group = c.split(r % 2, r);
    Buffer v = f32_buffer(be, {float(r)});
    group->all_reduce_sum(device_span(v));
    float want = 0;
    for (int q = r % 2; q < n; q += 2) want += float(q);
    check("split", v.to_host_f32()[0] == want && group->rank() == r / 2 && group->host().size() == (n + 1 - r % 2) / 2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  mt::MpiSession session(&argc, &argv);
  auto world = session.world();
  mt::Backend strict = mt::cpu_strict_backend_create();
  run_all(*world, strict, "cpu-strict");
  mt::cpu_strict_backend_destroy(strict);
  run_all(*world, mt::cpu_backend(), "cpu");
  world->barrier();
  return 0;
}
