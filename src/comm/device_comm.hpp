#pragma once
// Communication of device memory. Every payload of these calls lives on the device of the
// backend the communicator was made for, and the host never reads it; counts and small scalars
// (per-expert row counts, loss sums, stop votes, timings) travel on host(), a Comm of the same
// ranks over host memory.
//
// Implementations:
//   StagedComm  device -> host -> MPI -> device. The path for ranks that share one GPU (NCCL
//               refuses two ranks on one device), and with the strict CPU backend the proof in CI
//               that no layout touches device memory from the host. On the plain CPU backend
//               device memory is host memory, and it hands the pointers to MPI as they are.
//   NcclComm    one GPU per rank; the calls run on a stream of the communicator's own, ordered
//               with the backend's by events.
// Completion: a call returns when its result may be used by the next op queued on the backend
// (NCCL: queued on the same stream; staged: done). A Request's wait() gives the same promise for a
// non-blocking call; until then neither buffer may be touched.
#include <cstddef>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "tensor/buffer.hpp"

namespace mt {

// `count` elements of `dtype` at `data`, in device memory.
struct DeviceSpan {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
};
inline DeviceSpan device_span(const Buffer& b) { return {b.raw(), b.count(), b.dtype()}; }
inline DeviceSpan device_span(float* p, size_t n) { return {p, n, DType::f32}; }
// A payload that is only read (a send).
inline DeviceSpan device_span(const float* p, size_t n) { return {const_cast<float*>(p), n, DType::f32}; }

class DeviceComm {
 public:
  virtual ~DeviceComm() = default;
  virtual Comm& host() const = 0;  // the same ranks, for counts and scalars in host memory
  virtual const Backend& backend() const = 0;  // whose device memory and stream the calls use
  int rank() const { return host().rank(); }
  int size() const { return host().size(); }

  // Element-wise sums over every rank, in place (f32 or f64).
  virtual void all_reduce_sum(DeviceSpan data) = 0;
  virtual std::unique_ptr<Request> iall_reduce_sum(DeviceSpan data) = 0;
  // data holds size() equal blocks; block rank() of the sum lands in out (one block).
  virtual void reduce_scatter_sum(DeviceSpan data, DeviceSpan out) = 0;
  // Every rank contributes `mine`; `all` receives size() blocks in rank order. Any dtype (bfloat16
  // rows travel as bytes) whose block is whole 4-byte words.
  virtual void all_gather(DeviceSpan mine, DeviceSpan all) = 0;
  // send_counts[r] elements go to rank r from send (rank order); recv_counts[r] arrive from r.
  // Counts are in elements of the spans' dtype (any dtype: FP8 rows travel as bytes).
  virtual std::unique_ptr<Request> iall_to_all_v(DeviceSpan send, const std::vector<int>& send_counts,
                                                 DeviceSpan recv, const std::vector<int>& recv_counts) = 0;
  // Point-to-point: between two ranks, messages match in the order they were posted, as in NCCL
  // (which has no tags), so a receiver posts its receives in the order its peer sends.
  virtual std::unique_ptr<Request> isend(DeviceSpan data, int to) = 0;
  virtual std::unique_ptr<Request> irecv(DeviceSpan data, int from) = 0;
  // Ranks with the same color form a group, ordered by key (host() splits alike); collective over
  // this communicator. The group's calls queue on `backend`, a stream of the same device.
  virtual std::unique_ptr<DeviceComm> split_on(const Backend& backend, int color, int key) = 0;

  std::unique_ptr<DeviceComm> split(int color, int key) { return split_on(backend(), color, key); }

  void all_to_all_v(DeviceSpan send, const std::vector<int>& send_counts, DeviceSpan recv,
                    const std::vector<int>& recv_counts) {
    iall_to_all_v(send, send_counts, recv, recv_counts)->wait();
  }
  void send(DeviceSpan data, int to) { isend(data, to)->wait(); }
  void recv(DeviceSpan data, int from) { irecv(data, from)->wait(); }
};

}  // namespace mt
