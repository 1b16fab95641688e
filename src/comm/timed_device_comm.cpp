#include "comm/timed_device_comm.hpp"

#include "comm/timed_comm.hpp"
#include "comm/timed_request.hpp"

namespace mt {

namespace {

class TimedDeviceComm final : public DeviceComm {
 public:
  TimedDeviceComm(std::unique_ptr<DeviceComm> owned, DeviceComm& inner, double* host_seconds, DeviceTimer* device_time)
      : owned_(std::move(owned)), inner_(&inner), host_(make_timed_comm(inner.host(), host_seconds)),
        device_time_(device_time) {}

  Comm& host() const override { return *host_; }
  const Backend& backend() const override { return inner_->backend(); }
  void all_reduce_sum(DeviceSpan d) override { timed([&] { inner_->all_reduce_sum(d); }); }
  std::unique_ptr<Request> iall_reduce_sum(DeviceSpan d) override {
    return timed_request(timer(), [&] { return inner_->iall_reduce_sum(d); });
  }
  void reduce_scatter_sum(DeviceSpan data, DeviceSpan out) override {
    timed([&] { inner_->reduce_scatter_sum(data, out); });
  }
  void all_gather(DeviceSpan mine, DeviceSpan all) override { timed([&] { inner_->all_gather(mine, all); }); }
  std::unique_ptr<Request> iall_to_all_v(DeviceSpan send, const std::vector<int>& sc, DeviceSpan recv,
                                         const std::vector<int>& rc) override {
    return timed_request(timer(), [&] { return inner_->iall_to_all_v(send, sc, recv, rc); });
  }
  std::unique_ptr<Request> isend(DeviceSpan d, int to) override {
    return timed_request(timer(), [&] { return inner_->isend(d, to); });
  }
  std::unique_ptr<Request> irecv(DeviceSpan d, int from) override {
    return timed_request(timer(), [&] { return inner_->irecv(d, from); });
  }
  std::unique_ptr<DeviceComm> split_on(const Backend& backend, int color, int key) override {
    return inner_->split_on(backend, color, key);
  }

 private:
  TimeIt timer() {
    return [this](const std::function<void()>& f) { timed(f); };
  }
  template <class F>
  void timed(F&& f) {
    device_time_->time(f);
  }

  std::unique_ptr<DeviceComm> owned_;  // null when the caller keeps the inner communicator
  DeviceComm* inner_;
  std::unique_ptr<Comm> host_;  // inner_->host(), timed on the host clock
  DeviceTimer* device_time_;
};

}  // namespace

std::unique_ptr<DeviceComm> make_timed_device_comm(std::unique_ptr<DeviceComm> inner, double* host_seconds,
                                                   DeviceTimer* device_time) {
  DeviceComm& ref = *inner;
  return std::make_unique<TimedDeviceComm>(std::move(inner), ref, host_seconds, device_time);
}

std::unique_ptr<DeviceComm> make_timed_device_comm(DeviceComm& inner, double* host_seconds, DeviceTimer* device_time) {
  return std::make_unique<TimedDeviceComm>(nullptr, inner, host_seconds, device_time);
}

}  // namespace mt
