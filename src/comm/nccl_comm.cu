// NcclComm: DeviceComm over NCCL on a stream of its own beside the CUDA backend's (see
// src/comm/nccl_comm.hpp for the design: collective construction, ordering, held point-to-point
// calls, ring links, errors). NCCL is called through the table nccl_library.cuh loads at run time.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/gather_text.hpp"
#include "comm/nccl_comm.hpp"
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_state.cuh"
#include "comm/nccl_library.cuh"
#include "util/error.hpp"

namespace mt {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat;
    case DType::f64: return ncclDouble;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
  }
  throw std::logic_error("NcclComm: unknown DType");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

std::string describe(const char* call, const DeviceSpan& s) {
  return std::string(call) + " of " + std::to_string(s.count) + " " + dtype_name(s.dtype);
}

// A CUDA event recorded after a call, shared by the requests of the call (a group of held
// point-to-point calls has one for all).
struct Event {
  cudaEvent_t event = nullptr;
  ~Event() {
    if (event) cudaEventDestroy(event);
  }
};

// What a request waits on: its event, or none yet while its point-to-point call is held.
struct Completion {
  std::shared_ptr<Event> issued;
  bool in_graph = false;  // made while a graph replayed its pass: the graph holds the call
};

class NcclComm;

class NcclRequest final : public Request {
 public:
  NcclRequest(NcclComm& comm, std::shared_ptr<Completion> done) : comm_(comm), done_(std::move(done)) {}
  void wait() override;

 private:
  NcclComm& comm_;
  std::shared_ptr<Completion> done_;
};

class NcclComm final : public DeviceComm {
 public:
  NcclComm(const NcclLibrary& nccl, Comm& host, std::unique_ptr<Comm> owned_host, const Backend& backend,
           ncclComm_t comm, bool one_way = false)
      : nccl_(nccl), owned_host_(std::move(owned_host)), host_(host), backend_(backend), state_(backend.state),
        comm_(comm), one_way_(one_way) {
    activate(state_);
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }

  ~NcclComm() override {
    links_.clear();  // before the communicator they were split from
    // Requests never waited for are a bug of the caller; while an exception unwinds, they are
    // expected and the communicator is aborted instead of flushed.
    const bool unwinding = std::uncaught_exceptions() > 0;
    if (!pending_.empty() && !unwinding)
      std::fprintf(stderr,
                   "moetrain: NcclComm on rank %d of %d destroyed with %zu point-to-point calls never waited for\n",
                   host_.rank(), host_.size(), pending_.size());
    activate(state_);
    const ncclResult_t r = (broken_ || unwinding) ? nccl_.CommAbort(comm_) : nccl_.CommDestroy(comm_);
    if (r != ncclSuccess)
      std::fprintf(stderr, "moetrain: destroying the NCCL communicator of rank %d of %d: %s\n", host_.rank(),
                   host_.size(), nccl_.GetErrorString(r));
    if (entry_) cudaEventDestroy(entry_);
    cudaStreamDestroy(stream_);  // releases once its work is done
  }

  Comm& host() const override { return host_; }
  const Backend& backend() const override { return backend_; }

  void all_reduce_sum(DeviceSpan data) override {
    require_sum_type(data, "all_reduce_sum");
    if (in_replay()) return;
    start();
    check(nccl_.AllReduce(data.data, data.data, data.count, nccl_type(data.dtype), ncclSum, comm_, stream_),
          describe("all_reduce_sum", data));
    finish();
  }

  std::unique_ptr<Request> iall_reduce_sum(DeviceSpan data) override {
    require_sum_type(data, "iall_reduce_sum");
    if (in_replay()) return replayed();
    start();
    check(nccl_.AllReduce(data.data, data.data, data.count, nccl_type(data.dtype), ncclSum, comm_, stream_),
          describe("iall_reduce_sum", data));
    return recorded();
  }

  void reduce_scatter_sum(DeviceSpan data, DeviceSpan out) override {
    require_sum_type(data, "reduce_scatter_sum");
    require(out.dtype == data.dtype && data.count == out.count * size_t(size()),
            describe("reduce_scatter_sum", data) + " into " + describe("a block", out) +
                " (the data must be size() blocks of the output's dtype)");
    if (in_replay()) return;
    start();
    check(nccl_.ReduceScatter(data.data, out.data, out.count, nccl_type(data.dtype), ncclSum, comm_, stream_),
          describe("reduce_scatter_sum", data));
    finish();
  }

  void all_gather(DeviceSpan mine, DeviceSpan all) override {
    require(all.dtype == mine.dtype && all.count == mine.count * size_t(size()),
            describe("all_gather", mine) + " into " + describe("a buffer", all) + " (it must hold size() blocks)");
    if (in_replay()) return;
    start();
    check(nccl_.AllGather(mine.data, all.data, mine.count, nccl_type(mine.dtype), comm_, stream_),
          describe("all_gather", mine));
    finish();
  }

  std::unique_ptr<Request> iall_to_all_v(DeviceSpan send, const std::vector<int>& send_counts, DeviceSpan recv,
                                         const std::vector<int>& recv_counts) override {
    const std::string what = describe("all_to_all_v", send);
    require(send.dtype == recv.dtype, what + ": send and receive dtypes differ");
    check_counts(send_counts, send, what + " (send counts)");
    check_counts(recv_counts, recv, what + " (receive counts)");
    if (in_replay()) return replayed();
    start();
    const size_t bytes = dtype_bytes(send.dtype);
    size_t send_at = 0, recv_at = 0;
    check(nccl_.GroupStart(), what + ": ncclGroupStart");
    for (int r = 0; r < size(); ++r) {
      // Zero counts are left out on both sides alike: my send count to r is r's receive count from me.
      if (send_counts[r] > 0)
        check(nccl_.Send(static_cast<char*>(send.data) + send_at * bytes, size_t(send_counts[r]), nccl_type(send.dtype),
                         r, comm_, stream_),
              what + ": ncclSend to rank " + std::to_string(r));
      if (recv_counts[r] > 0)
        check(nccl_.Recv(static_cast<char*>(recv.data) + recv_at * bytes, size_t(recv_counts[r]), nccl_type(recv.dtype),
                       r, comm_, stream_), what + ": ncclRecv from rank " + std::to_string(r));
      send_at += size_t(send_counts[r]);
      recv_at += size_t(recv_counts[r]);
    }
    check(nccl_.GroupEnd(), what);
    return recorded();
  }

  std::unique_ptr<Request> isend(DeviceSpan data, int to) override {
    if (in_replay()) return replayed();
    if (NcclComm* link = link_to(to, true)) return link->issue(true, data);
    return hold(true, data, to);
  }
  std::unique_ptr<Request> irecv(DeviceSpan data, int from) override {
    if (in_replay()) return replayed();
    if (NcclComm* link = link_to(from, false)) return link->issue(false, data);
    return hold(false, data, from);
  }

  std::unique_ptr<DeviceComm> split_on(const Backend& backend, int color, int key) override {
    require(color >= 0, "split(color " + std::to_string(color) + "): NCCL takes colors >= 0");
    require(backend.state && backend.state->device == state_->device,
            "split_on: the group's stream must be on this communicator's GPU");
    return split_off(backend, color, key, false);
  }

  // Opens this rank's links to its ring neighbours, collectively over the group. The ring's edges
  // (i, i+1 mod n) are split off in three rounds, in each of which a rank is on at most one edge:
  // those from an even i, those from an odd i, and the closing edge (n-1, 0). Each edge gives two
  // links, one per direction, whose rank 0 is the sending end.
  void open_ring_links() {
    const int n = size(), me = rank();
    if (n < 2) return;
    const bool ring_closes = n > 2;  // with two ranks, (1, 0) is the edge (0, 1) again
    auto in_round = [&](int i, int round) {
      const bool inner = i + 1 < n;
      return round == 0 ? inner && i % 2 == 0 : round == 1 ? inner && i % 2 == 1 : !inner && ring_closes;
    };
    for (int round = 0; round < 3; ++round)
      for (bool upward : {true, false}) {
        int edge = -1;  // i of my edge (i, i+1 mod n) in this round
        for (int i : {me, (me + n - 1) % n})
          if (in_round(i, round)) edge = i;
        const int sender = upward ? edge : (edge + 1) % n;
        const int peer = me == edge ? (edge + 1) % n : edge;
        std::unique_ptr<NcclComm> link = split_off(backend_, edge, me == sender ? 0 : 1, true);
        if (!link) continue;
        link->connect();
        links_.push_back({peer, me == sender, std::move(link)});
      }
  }

  // NCCL connects a pair on its first send and receive, and the host waits in that call until
  // the peer makes its own: a receive posted early would block this rank's thread until the
  // sender's first send. One float each way now, while both ends are here (every rank is on one
  // edge of a round at most), connects the link before any pipeline transfer.
  void connect() {
    activate(state_);
    float* one = nullptr;
    MT_CUDA_CHECK(cudaMalloc(&one, sizeof(float)));
    MT_CUDA_CHECK(cudaMemsetAsync(one, 0, sizeof(float), stream_));
    post(rank() == 0, device_span(one, 1), 1 - rank(), " connecting the pipeline link");
    MT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    MT_CUDA_CHECK(cudaFree(one));
    check_async("connecting the pipeline link with rank " + std::to_string(1 - rank()));
  }

  // A link's call: issued at once on the link's own stream (see the header for why that is safe).
  std::unique_ptr<Request> issue(bool send, DeviceSpan data) {
    require(one_way_, "issue() is a ring link's call");
    start();
    const int peer = 1 - rank();
    if (data.count > 0) post(send, data, peer, " on the link of the pipeline");
    return recorded();
  }

  // One ncclSend or ncclRecv of `data` with `peer` on the communication stream; `what` names it
  // in errors (after the call, the payload and the peer).
  void post(bool send, DeviceSpan data, int peer, const std::string& what) {
    const std::string call = describe(send ? "send" : "recv", data) + (send ? " to" : " from") + " rank " +
                             std::to_string(peer) + what;
    if (send) check(nccl_.Send(data.data, data.count, nccl_type(data.dtype), peer, comm_, stream_), call);
    else check(nccl_.Recv(data.data, data.count, nccl_type(data.dtype), peer, comm_, stream_), call);
  }

  // Issues the held point-to-point calls as one NCCL group and records their completion.
  void flush() {
    if (pending_.empty()) return;
    activate(state_);
    enter();
    const std::string what = std::to_string(pending_.size()) + " point-to-point call(s)";
    check(nccl_.GroupStart(), what + ": ncclGroupStart");
    for (const Held& h : pending_)
      if (h.data.count > 0) post(h.send, h.data, h.peer, "");  // else the partner's matching call is empty too
    check(nccl_.GroupEnd(), what);
    const std::shared_ptr<Event> issued = record();
    for (Held& h : pending_) h.done->issued = issued;
    pending_.clear();
  }

  // The backend's stream waits for `done` (see the header for why the host does not).
  void wait_for(Completion& done) {
    if (done.in_graph) return;
    if (!done.issued) flush();
    activate(state_);
    MT_CUDA_CHECK(cudaStreamWaitEvent(state_->stream, done.issued->event, 0));
    check_async("wait");
  }

 private:
  struct Held {
    bool send;
    DeviceSpan data;
    int peer;
    std::shared_ptr<Completion> done;  // what its request waits on
  };

  struct Link {
    int peer;      // the neighbour's rank in this communicator
    bool sending;  // the direction: to the neighbour, or from it
    std::unique_ptr<NcclComm> comm;
  };

  NcclComm* link_to(int peer, bool sending) {
    for (Link& l : links_)
      if (l.peer == peer && l.sending == sending) return l.comm.get();
    return nullptr;
  }

  // ncclCommSplit with the host group split alike, collectively over this communicator. A color
  // < 0 leaves this rank out: it returns null (its host group, a singleton, is dropped).
  std::unique_ptr<NcclComm> split_off(const Backend& backend, int color, int key, bool one_way) {
    start();
    std::unique_ptr<Comm> sub_host = host_.split(color >= 0 ? color : size() + rank(), key);
    ncclComm_t sub = nullptr;
    check(nccl_.CommSplit(comm_, color >= 0 ? color : NCCL_SPLIT_NOCOLOR, key, &sub, nullptr),
          "split(color " + std::to_string(color) + ", key " + std::to_string(key) + ")");
    if (color < 0) return nullptr;
    Comm& h = *sub_host;
    return std::make_unique<NcclComm>(nccl_, h, std::move(sub_host), backend, sub, one_way);
  }

  // Before any call: the held point-to-point calls go first, so every rank issues its NCCL calls in
  // the order it made them; then the communication stream waits for what the backend's stream
  // queued so far (the payload's producers).
  void start() {
    flush();
    activate(state_);
    enter();
  }

  void enter() {
    if (!entry_) MT_CUDA_CHECK(cudaEventCreateWithFlags(&entry_, cudaEventDisableTiming));
    MT_CUDA_CHECK(cudaEventRecord(entry_, state_->stream));
    MT_CUDA_CHECK(cudaStreamWaitEvent(stream_, entry_, 0));
  }

  // After a blocking call: the backend's later ops see its result.
  void finish() {
    const std::shared_ptr<Event> done = record();
    MT_CUDA_CHECK(cudaStreamWaitEvent(state_->stream, done->event, 0));
  }

  std::unique_ptr<Request> hold(bool send, DeviceSpan data, int peer) {
    require(!one_way_, "a link's calls go through issue()");
    require(peer >= 0 && peer < size(), std::string(send ? "isend to" : "irecv from") + " rank " +
                                            std::to_string(peer) + ": the group has ranks 0 to " +
                                            std::to_string(size() - 1));
    auto done = std::make_shared<Completion>();
    pending_.push_back({send, data, peer, done});
    return std::make_unique<NcclRequest>(*this, done);
  }

  std::shared_ptr<Event> record() {
    auto e = std::make_shared<Event>();
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming));
    MT_CUDA_CHECK(cudaEventRecord(e->event, stream_));
    return e;
  }

  // A request for the call just queued.
  std::unique_ptr<Request> recorded() {
    return std::make_unique<NcclRequest>(*this, std::make_shared<Completion>(Completion{record()}));
  }

  // While a graph replays a pass, the pass's host code runs again to keep the model's bookkeeping,
  // but its NCCL calls (and the event waits around them) are in the graph, which the replay
  // launches: issuing them now as well would run every collective twice.
  bool in_replay() const { return backend_.graph && backend_.graph->replaying(); }
  std::unique_ptr<Request> replayed() {
    return std::make_unique<NcclRequest>(*this, std::make_shared<Completion>(Completion{nullptr, true}));
  }

  // Counts of one per rank that fit in `span`.
  void check_counts(const std::vector<int>& counts, const DeviceSpan& span, const std::string& what) const {
    require(counts.size() == size_t(size()), what + ": " + std::to_string(counts.size()) + " counts for " +
                                                 std::to_string(size()) + " ranks");
    size_t total = 0;
    for (int c : counts) {
      require(c >= 0, what + ": a negative count");
      total += size_t(c);
    }
    require(total <= span.count, what + ": the counts add up to " + std::to_string(total) +
                                     " elements, the buffer holds " + std::to_string(span.count));
  }

  void require_sum_type(const DeviceSpan& s, const char* call) const {
    require(s.dtype == DType::f32 || s.dtype == DType::f64, describe(call, s) + ": sums are of f32 or f64");
  }

  // A misuse of the interface by moetrain's own code.
  void require(bool ok, const std::string& what) const {
    if (!ok)
      throw std::logic_error("NcclComm on rank " + std::to_string(host_.rank()) + " of " + std::to_string(size()) +
                             ": " + what);
  }

  void check(ncclResult_t r, const std::string& what) {
    if (r != ncclSuccess && r != ncclInProgress) fail(r, what);
    check_async(what);
  }

  // Errors of work already queued (a peer that died, a network failure) surface here.
  void check_async(const std::string& what) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = nccl_.CommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) fail(r, what + " (ncclCommGetAsyncError)");
    if (async != ncclSuccess && async != ncclInProgress) fail(async, what + " (asynchronous)");
  }

  [[noreturn]] void fail(ncclResult_t r, const std::string& what) {
    broken_ = true;
    const char* last = nccl_.GetLastError(comm_);
    throw std::runtime_error("NCCL " + what + " failed on rank " + std::to_string(host_.rank()) + " of " +
                             std::to_string(size()) + " (GPU " + std::to_string(state_->device) + "): " +
                             nccl_.GetErrorString(r) + (last && *last ? std::string("; NCCL says: ") + last : "") +
                             "; NCCL_DEBUG=WARN in the environment makes NCCL log why");
  }

  const NcclLibrary& nccl_;          // the process's NCCL, loaded for good
  std::unique_ptr<Comm> owned_host_;  // the host group a split made; null for the first communicator
  Comm& host_;
  Backend backend_;
  DeviceState* state_;  // backend_'s: its GPU and stream
  ncclComm_t comm_;
  cudaStream_t stream_ = nullptr;  // the communication stream: NCCL's kernels run here
  cudaEvent_t entry_ = nullptr;    // the backend stream's point the next call starts after
  std::vector<Held> pending_;  // isend/irecv not yet issued
  bool broken_ = false;        // after an error the communicator is aborted, not destroyed
  bool one_way_;               // a ring link: two ranks, messages in one direction only
  std::vector<Link> links_;    // after open_ring_links: one per neighbour and direction
};

void NcclRequest::wait() { comm_.wait_for(*done_); }

}  // namespace

std::unique_ptr<DeviceComm> make_nccl_comm(Comm& host, const Backend& backend) {
  const std::string name = backend.ops ? backend.ops->name : "none";
  if (name != "cuda")
    throw UserError("NCCL moves device memory of the CUDA backend, but rank " + std::to_string(host.rank()) +
                    " trains on the " + name + " backend: set precision.device = \"cuda\", or communicate through MPI");
  std::string why;
  const NcclLibrary* nccl = nccl_library(&why);
  if (!nccl) throw UserError("NCCL cannot be loaded: " + why);
  DeviceState* state = backend.state;
  activate(state);
  ncclUniqueId id{};
  if (host.rank() == 0) {
    const ncclResult_t r = nccl->GetUniqueId(&id);
    if (r != ncclSuccess)
      throw std::runtime_error(std::string("NCCL ncclGetUniqueId failed on rank 0 of ") + std::to_string(host.size()) +
                               ": " + nccl->GetErrorString(r) +
                               "; NCCL_DEBUG=WARN in the environment makes NCCL log why");
  }
  const std::string sent = host.rank() == 0 ? std::string(id.internal, sizeof id.internal) : std::string();
  const std::string got = all_gather_text(host, sent)[0];
  if (got.size() != sizeof id.internal)
    throw std::logic_error("make_nccl_comm: NCCL's unique id arrived with " + std::to_string(got.size()) + " bytes");
  std::memcpy(id.internal, got.data(), got.size());
  ncclComm_t comm = nullptr;
  const ncclResult_t r = nccl->CommInitRank(&comm, host.size(), id, host.rank());
  if (r != ncclSuccess)
    throw std::runtime_error("NCCL ncclCommInitRank failed on rank " + std::to_string(host.rank()) + " of " +
                             std::to_string(host.size()) + " (GPU " + std::to_string(state->device) + "): " +
                             nccl->GetErrorString(r) + "; every rank needs a GPU of its own, and NCCL_DEBUG=WARN in " +
                             "the environment makes NCCL log why");
  return std::make_unique<NcclComm>(*nccl, host, nullptr, backend, comm);
}

void open_ring_links(DeviceComm& comm) {
  if (auto* nccl = dynamic_cast<NcclComm*>(&comm)) nccl->open_ring_links();
}

}  // namespace mt
