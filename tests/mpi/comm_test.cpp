// Every Comm call under mpirun: each rank checks what it received against what the others must
// have sent, and rank 0 prints one PASS or FAIL line per call. Run with 3 or more ranks.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "comm/gather_text.hpp"
#include "comm/mpi_comm.hpp"
#include "mpi/report.hpp"

using mt::Comm;

int main(int argc, char** argv) {
  mt::MpiSession session(&argc, &argv);
  auto world = session.world();
  Comm& c = *world;
  const int r = c.rank(), n = c.size();

  {
    std::vector<float> v{float(r), 1.0f};
    c.all_reduce_sum(v);
    report(c, "all_reduce_sum (float)", v[0] == float(n * (n - 1) / 2) && v[1] == float(n));
  }
  {
    std::vector<double> v{0.1 * r};
    c.all_reduce_sum(v);
    report(c, "all_reduce_sum (double)", std::abs(v[0] - 0.1 * n * (n - 1) / 2) < 1e-12);
  }
  {
    // Rank r contributes block b filled with r*10+b; block `rank` of the sum is sum_r (r*10+rank).
    std::vector<float> data(2 * n), out(2);
    for (int b = 0; b < n; ++b) data[2 * b] = data[2 * b + 1] = float(r * 10 + b);
    c.reduce_scatter_sum(data, out);
    const float want = float(10 * n * (n - 1) / 2 + n * r);
    report(c, "reduce_scatter_sum", out[0] == want && out[1] == want);
  }
  {
    std::vector<float> mine{float(r), float(-r)}, all(2 * n);
    c.all_gather(mine, all);
    bool ok = true;
    for (int q = 0; q < n; ++q) ok = ok && all[2 * q] == float(q) && all[2 * q + 1] == float(-q);
    report(c, "all_gather", ok);
  }
  {
    // Rank r sends q+1 values of r*100+q to rank q; so it receives r+1 values from each rank q.
    std::vector<int> sc(n), rc(n, r + 1);
    std::vector<float> send;
    for (int q = 0; q < n; ++q) {
      sc[q] = q + 1;
      for (int k = 0; k <= q; ++k) send.push_back(float(r * 100 + q));
    }
    std::vector<float> recv(n * (r + 1));
    c.all_to_all_v(send, sc, recv, rc);
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (int k = 0; k <= r; ++k) ok = ok && recv[q * (r + 1) + k] == float(q * 100 + r);
    report(c, "all_to_all_v", ok);
  }
  {
    // Non-blocking forms, with the count vectors gone before the wait (the Comm keeps its own).
    std::vector<float> sum(3, float(r + 1));
    auto reduce = c.iall_reduce_sum(sum);
    std::vector<float> send, recv(n * (r + 1));
    std::unique_ptr<mt::Request> exchange;
    {
      std::vector<int> sc(n), rc(n, r + 1);
      for (int q = 0; q < n; ++q) {
        sc[q] = q + 1;
        for (int k = 0; k <= q; ++k) send.push_back(float(r * 100 + q));
      }
      exchange = c.iall_to_all_v(send, sc, recv, rc);
    }
    reduce->wait();
    exchange->wait();
    const float want = float(n * (n + 1) / 2);
    report(c, "iall_reduce_sum", sum[0] == want && sum[2] == want);
    bool ok = true;
    for (int q = 0; q < n; ++q)
      for (int k = 0; k <= r; ++k) ok = ok && recv[q * (r + 1) + k] == float(q * 100 + r);
    report(c, "iall_to_all_v", ok);
  }
  {
    // Rank r sends r*10+q (twice) to rank q: it receives q*10+r from each q.
    std::vector<int> send(2 * n), recv(2 * n);
    for (int q = 0; q < n; ++q) send[2 * q] = send[2 * q + 1] = r * 10 + q;
    c.all_to_all(send, recv);
    bool ok = true;
    for (int q = 0; q < n; ++q) ok = ok && recv[2 * q] == q * 10 + r && recv[2 * q + 1] == q * 10 + r;
    report(c, "all_to_all", ok);
  }
  {
    // A ring: blocking send to the right would deadlock, so even ranks send first.
    std::vector<float> out{float(r)}, in{-1};
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    if (r % 2 == 0) {
      c.send(out, right, 7);
      c.recv(in, left, 7);
    } else {
      c.recv(in, left, 7);
      c.send(out, right, 7);
    }
    report(c, "send / recv", in[0] == float(left));
  }
  {
    // Every rank posts a receive from the left and a send to the right before waiting.
    std::vector<float> out{float(r), float(2 * r)}, in{-1, -1};
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    auto rx = c.irecv(in, left, 9);
    auto tx = c.isend(out, right, 9);
    tx->wait();
    rx->wait();
    report(c, "isend / irecv", in[0] == float(left) && in[1] == float(2 * left));
  }
  {
    // Even and odd ranks form two groups; each sums its members' ranks.
    auto group = c.split(r % 2, r);
    std::vector<double> v{double(r)};
    group->all_reduce_sum(v);
    double want = 0;
    for (int q = r % 2; q < n; q += 2) want += q;
    report(c, "split", v[0] == want && group->rank() == r / 2);
  }
  {
    // Texts of different lengths (rank 0's empty), with bytes 0 and 255 inside.
    auto text = [](int q) { return q == 0 ? std::string() : std::string(size_t(q), char(q)) + '\0' + '\xff'; };
    const std::vector<std::string> all = mt::all_gather_text(c, text(r));
    bool ok = all.size() == size_t(n);
    for (int q = 0; ok && q < n; ++q) ok = all[q] == text(q);
    report(c, "all_gather_text", ok);
  }
  c.barrier();
  return 0;
}
