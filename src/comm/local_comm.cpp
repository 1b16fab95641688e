// One rank: collectives are copies, and there is no one to talk to.
#include <algorithm>
#include <stdexcept>

#include "comm/comm.hpp"

namespace mt {

namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool concurrent_calls() const override { return true; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<double>) override {}
  void reduce_scatter_sum(std::span<const float> data, std::span<float> out) override {
    std::copy(data.begin(), data.begin() + out.size(), out.begin());
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    std::copy(mine.begin(), mine.end(), all.begin());
  }
  void all_to_all_v(std::span<const float> send, const std::vector<int>& send_counts, std::span<float> recv,
                    const std::vector<int>&) override {
    std::copy(send.begin(), send.begin() + send_counts[0], recv.begin());
  }
  std::unique_ptr<Request> iall_reduce_sum(std::span<float>) override { return std::make_unique<Done>(); }
  std::unique_ptr<Request> iall_to_all_v(std::span<const float> send, const std::vector<int>& send_counts,
                                         std::span<float> recv, const std::vector<int>& recv_counts) override {
    all_to_all_v(send, send_counts, recv, recv_counts);
    return std::make_unique<Done>();
  }
  void all_to_all(std::span<const int> send, std::span<int> recv) override {
    std::copy(send.begin(), send.end(), recv.begin());
  }
  void send(std::span<const float>, int, int) override { no_peer(); }
  void recv(std::span<float>, int, int) override { no_peer(); }
  std::unique_ptr<Request> isend(std::span<const float>, int, int) override { no_peer(); }
  std::unique_ptr<Request> irecv(std::span<float>, int, int) override { no_peer(); }
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<LocalComm>(); }

 private:
  struct Done final : Request {
    void wait() override {}
  };
  [[noreturn]] static void no_peer() { throw std::logic_error("point-to-point call on a single-rank run"); }
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() { return std::make_unique<LocalComm>(); }

}  // namespace mt
