#include "comm/staged_comm.hpp"

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

namespace mt {

namespace {

// The host Comm moves floats: a payload of any dtype travels as the 4-byte words that hold its
// bytes (the last word of a block padded).
size_t words(size_t bytes) { return (bytes + 3) / 4; }
size_t bytes_of(const DeviceSpan& s) { return s.count * dtype_bytes(s.dtype); }

// A staged non-blocking call: the host buffers MPI works on live here until wait(), which then
// uploads what arrived. The caller must wait() before dropping it.
class StagedRequest final : public Request {
 public:
  std::vector<float> leaving, arriving;
  std::unique_ptr<Request> inner;
  std::function<void()> arrived;  // uploads `arriving` to the device

  void wait() override {
    inner->wait();
    if (arrived) std::exchange(arrived, nullptr)();
  }
};

class StagedComm final : public DeviceComm {
 public:
  StagedComm(Comm& host, const Backend& backend, std::unique_ptr<Comm> owned = nullptr)
      : owned_(std::move(owned)), host_(&host), be_(backend), staging_(backend),
        direct_(backend.host_addressable()) {
    // Its copies emulate NCCL, which moves no data through the host: they are not the step's.
    if (backend.counters) staging_.counters = &backend.counters->staging();
  }

  Comm& host() const override { return *host_; }
  const Backend& backend() const override { return be_; }

  void all_reduce_sum(DeviceSpan d) override {
    if (d.dtype == DType::f64) return reduce(static_cast<double*>(d.data), d.count);
    reduce(f32(d, "all_reduce_sum"), d.count);
  }

  std::unique_ptr<Request> iall_reduce_sum(DeviceSpan d) override {
    float* p = f32(d, "iall_reduce_sum");
    if (direct_) return host_->iall_reduce_sum({p, d.count});
    auto r = std::make_unique<StagedRequest>();
    r->arriving.resize(d.count);
    down(r->arriving.data(), p, bytes_of(d));
    r->inner = host_->iall_reduce_sum(r->arriving);
    r->arrived = [this, p, r = r.get(), n = bytes_of(d)] { up(p, r->arriving.data(), n); };
    return r;
  }

  void reduce_scatter_sum(DeviceSpan data, DeviceSpan out) override {
    float* in = f32(data, "reduce_scatter_sum");
    float* o = f32(out, "reduce_scatter_sum");
    if (direct_) return host_->reduce_scatter_sum({in, data.count}, {o, out.count});
    std::vector<float> h(data.count), ho(out.count);
    down(h.data(), in, bytes_of(data));
    host_->reduce_scatter_sum(h, ho);
    up(o, ho.data(), bytes_of(out));
  }

  // Any dtype whose block is whole 4-byte words: the host Comm moves the words as they are.
  void all_gather(DeviceSpan mine, DeviceSpan all) override {
    if (mine.dtype != all.dtype) throw std::invalid_argument("StagedComm::all_gather: the dtypes differ");
    if (bytes_of(mine) % 4 != 0)
      throw std::invalid_argument("StagedComm::all_gather: a block of " + std::to_string(bytes_of(mine)) +
                                  " bytes is not whole 4-byte words");
    float* m = static_cast<float*>(mine.data);
    float* a = static_cast<float*>(all.data);
    const size_t mw = bytes_of(mine) / 4, aw = bytes_of(all) / 4;
    if (direct_) return host_->all_gather({m, mw}, {a, aw});
    std::vector<float> hm(mw), ha(aw);
    down(hm.data(), m, bytes_of(mine));
    host_->all_gather(hm, ha);
    up(a, ha.data(), bytes_of(all));
  }

  std::unique_ptr<Request> iall_to_all_v(DeviceSpan send, const std::vector<int>& send_counts, DeviceSpan recv,
                                         const std::vector<int>& recv_counts) override {
    if (send.dtype != recv.dtype)
      throw std::invalid_argument("StagedComm::iall_to_all_v: send and receive dtypes differ");
    if (direct_ && send.dtype == DType::f32)
      return host_->iall_to_all_v({static_cast<const float*>(send.data), send.count}, send_counts,
                                  {static_cast<float*>(recv.data), recv.count}, recv_counts);
    const size_t b = dtype_bytes(send.dtype);
    auto r = std::make_unique<StagedRequest>();
    const std::vector<int> send_words = block_words(send_counts, b), recv_words = block_words(recv_counts, b);
    r->leaving.resize(total(send_words));
    r->arriving.resize(total(recv_words));
    // Each block starts on a word of its own: blocks of odd byte counts are padded.
    size_t at = 0, word = 0;
    for (size_t q = 0; q < send_counts.size(); ++q) {
      down(r->leaving.data() + word, static_cast<const std::byte*>(send.data) + at, size_t(send_counts[q]) * b);
      at += size_t(send_counts[q]) * b;
      word += size_t(send_words[q]);
    }
    r->inner = host_->iall_to_all_v(r->leaving, send_words, r->arriving, recv_words);
    r->arrived = [this, r = r.get(), dst = static_cast<std::byte*>(recv.data), recv_counts, recv_words, b] {
      size_t at = 0, word = 0;
      for (size_t q = 0; q < recv_counts.size(); ++q) {
        up(dst + at, r->arriving.data() + word, size_t(recv_counts[q]) * b);
        at += size_t(recv_counts[q]) * b;
        word += size_t(recv_words[q]);
      }
    };
    return r;
  }

  // One MPI tag for every message: MPI's non-overtaking rule then matches them in order, as NCCL.
  static constexpr int kTag = 0;

  std::unique_ptr<Request> isend(DeviceSpan d, int to) override {
    if (direct_ && d.dtype == DType::f32) return host_->isend({static_cast<const float*>(d.data), d.count}, to, kTag);
    auto r = std::make_unique<StagedRequest>();
    r->leaving.resize(words(bytes_of(d)));
    down(r->leaving.data(), d.data, bytes_of(d));
    r->inner = host_->isend(r->leaving, to, kTag);
    return r;
  }

  std::unique_ptr<Request> irecv(DeviceSpan d, int from) override {
    if (direct_ && d.dtype == DType::f32) return host_->irecv({static_cast<float*>(d.data), d.count}, from, kTag);
    auto r = std::make_unique<StagedRequest>();
    r->arriving.resize(words(bytes_of(d)));
    r->inner = host_->irecv(r->arriving, from, kTag);
    r->arrived = [this, r = r.get(), dst = d.data, n = bytes_of(d)] { up(dst, r->arriving.data(), n); };
    return r;
  }

  std::unique_ptr<DeviceComm> split_on(const Backend& backend, int color, int key) override {
    std::unique_ptr<Comm> sub = host_->split(color, key);
    Comm& h = *sub;
    return std::make_unique<StagedComm>(h, backend, std::move(sub));
  }

 private:
  template <class T>
  void reduce(T* p, size_t n) {
    if (direct_) return host_->all_reduce_sum(std::span<T>(p, n));
    std::vector<T> h(n);
    down(h.data(), p, n * sizeof(T));
    host_->all_reduce_sum(std::span<T>(h));
    up(p, h.data(), n * sizeof(T));
  }
  static float* f32(const DeviceSpan& d, const char* call) {
    if (d.dtype != DType::f32)
      throw std::invalid_argument(std::string("StagedComm::") + call + ": the payload must be f32");
    return static_cast<float*>(d.data);
  }
  static std::vector<int> block_words(const std::vector<int>& counts, size_t elem_bytes) {
    std::vector<int> out(counts.size());
    for (size_t q = 0; q < counts.size(); ++q) out[q] = int(words(size_t(counts[q]) * elem_bytes));
    return out;
  }
  static size_t total(const std::vector<int>& v) {
    size_t n = 0;
    for (int x : v) n += size_t(x);
    return n;
  }
  void down(void* host, const void* device, size_t bytes) const {
    if (bytes) staging_.download(host, device, bytes);
  }
  void up(void* device, const void* host, size_t bytes) const {
    if (bytes) staging_.upload(device, host, bytes);
  }

  std::unique_ptr<Comm> owned_;  // the host communicator of a split
  Comm* host_;
  Backend be_;
  Backend staging_;  // be_, counting on its counters' staging set
  bool direct_;  // device memory is host memory: pointers go to the host Comm as they are
};

}  // namespace

std::unique_ptr<DeviceComm> make_staged_comm(Comm& host, const Backend& backend) {
  return std::make_unique<StagedComm>(host, backend);
}

}  // namespace mt
