#include "comm/mpi_comm.hpp"

// The C API only: the deprecated C++ bindings need their own library.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "comm/thread_check.hpp"

namespace mt {

namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, len));
}

class MpiRequest final : public Request {
 public:
  void wait() override { check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait"); }
  MPI_Request* handle() { return &req_; }
  // Arrays MPI reads until the operation completes (all-to-all-v counts and offsets).
  std::vector<int> keep[4];

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
};

// The communicator's thread check held for one call: a call that may not run stops the process
// (two threads inside one communicator would corrupt MPI's state, or hang every rank).
class Checked {
 public:
  Checked(ThreadCheck& check, const char* call) : check_(check) {
    const std::string why = check.enter(call);
    if (why.empty()) return;
    std::fprintf(stderr, "moetrain: internal error: %s\n", why.c_str());
    std::fflush(stderr);
    std::abort();
  }
  ~Checked() { check_.leave(); }
  Checked(const Checked&) = delete;
  Checked& operator=(const Checked&) = delete;

 private:
  ThreadCheck& check_;
};

// Element offsets of consecutive blocks of the given sizes.
std::vector<int> offsets(const std::vector<int>& counts) {
  std::vector<int> out(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) out[r] = out[r - 1] + counts[r - 1];
  return out;
}

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned, std::string label) : comm_(comm), owned_(owned), check_(std::move(label)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void set_label(const std::string& label) override { check_.set_label(label); }
  bool concurrent_calls() const override {
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level >= MPI_THREAD_MULTIPLE;
  }

  void all_reduce_sum(std::span<float> d) override {
    const Checked held(check_, "all_reduce_sum");
    check(MPI_Allreduce(MPI_IN_PLACE, d.data(), int(d.size()), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
  }
  void all_reduce_sum(std::span<double> d) override {
    const Checked held(check_, "all_reduce_sum");
    check(MPI_Allreduce(MPI_IN_PLACE, d.data(), int(d.size()), MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce");
  }
  void reduce_scatter_sum(std::span<const float> data, std::span<float> out) override {
    const Checked held(check_, "reduce_scatter_sum");
    check(MPI_Reduce_scatter_block(data.data(), out.data(), int(out.size()), MPI_FLOAT, MPI_SUM, comm_),
          "MPI_Reduce_scatter_block");
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    const Checked held(check_, "all_gather");
    check(MPI_Allgather(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), int(mine.size()), MPI_FLOAT, comm_),
          "MPI_Allgather");
  }
  void all_to_all_v(std::span<const float> send, const std::vector<int>& send_counts, std::span<float> recv,
                    const std::vector<int>& recv_counts) override {
    const Checked held(check_, "all_to_all_v");
    const std::vector<int> sd = offsets(send_counts), rd = offsets(recv_counts);
    check(MPI_Alltoallv(send.data(), send_counts.data(), sd.data(), MPI_FLOAT, recv.data(), recv_counts.data(),
                        rd.data(), MPI_FLOAT, comm_),
          "MPI_Alltoallv");
  }
  std::unique_ptr<Request> iall_reduce_sum(std::span<float> d) override {
    const Checked held(check_, "iall_reduce_sum");
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Iallreduce(MPI_IN_PLACE, d.data(), int(d.size()), MPI_FLOAT, MPI_SUM, comm_, r->handle()),
          "MPI_Iallreduce");
    return r;
  }
  std::unique_ptr<Request> iall_to_all_v(std::span<const float> send, const std::vector<int>& send_counts,
                                         std::span<float> recv, const std::vector<int>& recv_counts) override {
    const Checked held(check_, "iall_to_all_v");
    auto r = std::make_unique<MpiRequest>();
    r->keep[0] = send_counts;
    r->keep[1] = offsets(send_counts);
    r->keep[2] = recv_counts;
    r->keep[3] = offsets(recv_counts);
    check(MPI_Ialltoallv(send.data(), r->keep[0].data(), r->keep[1].data(), MPI_FLOAT, recv.data(), r->keep[2].data(),
                         r->keep[3].data(), MPI_FLOAT, comm_, r->handle()),
          "MPI_Ialltoallv");
    return r;
  }
  void all_to_all(std::span<const int> send, std::span<int> recv) override {
    const Checked held(check_, "all_to_all");
    const int block = int(send.size()) / size_;
    check(MPI_Alltoall(send.data(), block, MPI_INT, recv.data(), block, MPI_INT, comm_), "MPI_Alltoall");
  }
  void send(std::span<const float> d, int to, int tag) override {
    const Checked held(check_, "send");
    check(MPI_Send(d.data(), int(d.size()), MPI_FLOAT, to, tag, comm_), "MPI_Send");
  }
  void recv(std::span<float> d, int from, int tag) override {
    const Checked held(check_, "recv");
    check(MPI_Recv(d.data(), int(d.size()), MPI_FLOAT, from, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
  }
  std::unique_ptr<Request> isend(std::span<const float> d, int to, int tag) override {
    const Checked held(check_, "isend");
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Isend(d.data(), int(d.size()), MPI_FLOAT, to, tag, comm_, r->handle()), "MPI_Isend");
    return r;
  }
  std::unique_ptr<Request> irecv(std::span<float> d, int from, int tag) override {
    const Checked held(check_, "irecv");
    auto r = std::make_unique<MpiRequest>();
    check(MPI_Irecv(d.data(), int(d.size()), MPI_FLOAT, from, tag, comm_, r->handle()), "MPI_Irecv");
    return r;
  }
  void barrier() override {
    const Checked held(check_, "barrier");
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  std::unique_ptr<Comm> split(int color, int key) override {
    const Checked held(check_, "split");
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiComm>(sub, true, "a copy (split) of " + check_.label());
  }

 private:
  MPI_Comm comm_;
  bool owned_;
  ThreadCheck check_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool started_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  // DualPipe's overlapped pairs run their two passes on two threads; without MPI_THREAD_MULTIPLE
  // (concurrent_calls() says) they run one after the other.
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  // Errors come back as codes (turned into exceptions) instead of aborting inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

std::unique_ptr<Comm> MpiSession::world() const {
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false, "the world communicator");
}

void MpiSession::abort_job(int status) {
  MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);
}

}  // namespace mt
