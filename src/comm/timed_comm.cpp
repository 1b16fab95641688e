#include "comm/timed_comm.hpp"
#include "comm/timed_request.hpp"

#include <chrono>

namespace mt {

namespace {

class TimedComm final : public Comm {
 public:
  TimedComm(Comm& inner, double* seconds) : inner_(&inner), seconds_(seconds) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool concurrent_calls() const override { return inner_->concurrent_calls(); }
  void all_reduce_sum(std::span<float> d) override { timed([&] { inner_->all_reduce_sum(d); }); }
  void all_reduce_sum(std::span<double> d) override { timed([&] { inner_->all_reduce_sum(d); }); }
  void reduce_scatter_sum(std::span<const float> d, std::span<float> out) override {
    timed([&] { inner_->reduce_scatter_sum(d, out); });
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    timed([&] { inner_->all_gather(mine, all); });
  }
  void all_to_all_v(std::span<const float> send, const std::vector<int>& sc, std::span<float> recv,
                    const std::vector<int>& rc) override {
    timed([&] { inner_->all_to_all_v(send, sc, recv, rc); });
  }
  std::unique_ptr<Request> iall_reduce_sum(std::span<float> d) override {
    return timed_request(timer(), [&] { return inner_->iall_reduce_sum(d); });
  }
  std::unique_ptr<Request> iall_to_all_v(std::span<const float> send, const std::vector<int>& sc, std::span<float> recv,
                                         const std::vector<int>& rc) override {
    return timed_request(timer(), [&] { return inner_->iall_to_all_v(send, sc, recv, rc); });
  }
  void all_to_all(std::span<const int> send, std::span<int> recv) override {
    timed([&] { inner_->all_to_all(send, recv); });
  }
  void send(std::span<const float> d, int to, int tag) override { timed([&] { inner_->send(d, to, tag); }); }
  void recv(std::span<float> d, int from, int tag) override { timed([&] { inner_->recv(d, from, tag); }); }
  std::unique_ptr<Request> isend(std::span<const float> d, int to, int tag) override {
    return inner_->isend(d, to, tag);
  }
  std::unique_ptr<Request> irecv(std::span<float> d, int from, int tag) override { return inner_->irecv(d, from, tag); }
  void barrier() override { timed([&] { inner_->barrier(); }); }
  std::unique_ptr<Comm> split(int color, int key) override { return inner_->split(color, key); }

 private:
  TimeIt timer() {
    return [this](const std::function<void()>& f) { timed(f); };
  }
  template <class F>
  void timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    *seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Comm* inner_;
  double* seconds_;
};

}  // namespace

std::unique_ptr<Comm> make_timed_comm(Comm& inner, double* seconds) {
  return std::make_unique<TimedComm>(inner, seconds);
}

}  // namespace mt
