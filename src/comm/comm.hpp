#pragma once
// Communication of host memory between ranks: point-to-point (blocking and not), collectives,
// and sub-groups. MpiComm implements it over MPI; LocalComm is the one-rank case that needs no
// MPI. Payloads in device memory go through DeviceComm (device_comm.hpp), whose host() is a Comm.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mt {

// A pending non-blocking operation; wait() completes it.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether two threads may each run calls on different communicators at once (DualPipe's
  // overlapped pairs do): MPI_THREAD_MULTIPLE.
  virtual bool concurrent_calls() const = 0;
  // Names the communicator in the messages of its check that it takes one thread's calls at a time
  // (comm/thread_check.hpp; MPI's communicators have one).
  virtual void set_label(const std::string& label) { (void)label; }

  // Element-wise sums, in place, over every rank.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  // data holds size() equal blocks; afterwards block rank() of `out` holds their sum over ranks.
  virtual void reduce_scatter_sum(std::span<const float> data, std::span<float> out) = 0;
  // Every rank contributes `mine`; `all` receives size() blocks, rank order.
  virtual void all_gather(std::span<const float> mine, std::span<float> all) = 0;
  // send_counts[r] values go to rank r from send (in rank order); recv_counts[r] arrive from r.
  virtual void all_to_all_v(std::span<const float> send, const std::vector<int>& send_counts, std::span<float> recv,
                            const std::vector<int>& recv_counts) = 0;
  // Non-blocking forms: the buffers must stay untouched until wait() returns.
  virtual std::unique_ptr<Request> iall_reduce_sum(std::span<float> data) = 0;
  virtual std::unique_ptr<Request> iall_to_all_v(std::span<const float> send, const std::vector<int>& send_counts,
                                                 std::span<float> recv, const std::vector<int>& recv_counts) = 0;
  // Equal blocks of counts: send holds size() blocks, block r goes to rank r; recv block r came
  // from rank r.
  virtual void all_to_all(std::span<const int> send, std::span<int> recv) = 0;
  virtual void send(std::span<const float> data, int to, int tag) = 0;
  virtual void recv(std::span<float> data, int from, int tag) = 0;
  virtual std::unique_ptr<Request> isend(std::span<const float> data, int to, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(std::span<float> data, int from, int tag) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a group, ordered by key.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
};

// The single rank of a run started without mpirun.
std::unique_ptr<Comm> make_local_comm();

}  // namespace mt
