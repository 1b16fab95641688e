// The room an expert-parallel rank keeps for the all-to-all's arrivals (model/ep_receive.hpp): the
// storage model behind the memory pre-check and `moetrain plan` counts what the arenas of a real
// step hold, at ep = 2 and 4 (the peers mirrored in one process), and DeepSeek-V3's ep = 64 layout
// reserves what the worst case says, computed without running.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/ep_receive.hpp"
#include "model/model.hpp"
#include "ops/backend/cpu_ops.hpp"
#include "parallel/storage_model.hpp"
#include "test_helpers.hpp"
#include "train/accumulate.hpp"

namespace {

struct Done final : mt::Request {
  void wait() override {}
};

[[noreturn]] void unused() { throw std::logic_error("the mirrored expert-parallel group has no such call"); }

// Rank 0 of `size` expert-parallel ranks whose peers route exactly as it does: what peer q sends
// here is what this rank sends itself (block 0), so the counts and rows arriving are those of a
// real run where every rank sees the same tokens. Host memory throughout (the plain CPU backend).
class MirrorHost final : public mt::Comm {
 public:
  explicit MirrorHost(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  bool concurrent_calls() const override { return true; }
  void all_to_all(std::span<const int> send, std::span<int> recv) override {
    const size_t block = send.size() / size_t(size_);
    for (int q = 0; q < size_; ++q) std::copy(send.begin(), send.begin() + long(block), recv.begin() + long(q * block));
  }
  void all_reduce_sum(std::span<float>) override { unused(); }
  void all_reduce_sum(std::span<double>) override { unused(); }
  void reduce_scatter_sum(std::span<const float>, std::span<float>) override { unused(); }
  void all_gather(std::span<const float>, std::span<float>) override { unused(); }
  void all_to_all_v(std::span<const float>, const std::vector<int>&, std::span<float>,
                    const std::vector<int>&) override { unused(); }
  std::unique_ptr<mt::Request> iall_reduce_sum(std::span<float>) override { unused(); }
  std::unique_ptr<mt::Request> iall_to_all_v(std::span<const float>, const std::vector<int>&, std::span<float>,
                                             const std::vector<int>&) override { unused(); }
  void send(std::span<const float>, int, int) override { unused(); }
  void recv(std::span<float>, int, int) override { unused(); }
  std::unique_ptr<mt::Request> isend(std::span<const float>, int, int) override { unused(); }
  std::unique_ptr<mt::Request> irecv(std::span<float>, int, int) override { unused(); }
  void barrier() override {}
  std::unique_ptr<mt::Comm> split(int, int) override { unused(); }

 private:
  int size_;
};

class MirrorDevice final : public mt::DeviceComm {
 public:
  explicit MirrorDevice(int size) : host_(size) {}
  mt::Comm& host() const override { return host_; }
  const mt::Backend& backend() const override { return be_; }
  // Block q of recv gets what this rank sends itself; where the sizes differ (the way back, whose
  // values no test reads) the rest is zero.
  std::unique_ptr<mt::Request> iall_to_all_v(mt::DeviceSpan send, const std::vector<int>& send_counts,
                                             mt::DeviceSpan recv, const std::vector<int>& recv_counts) override {
    const size_t bytes = mt::dtype_bytes(send.dtype);
    auto* out = static_cast<char*>(recv.data);
    for (int q = 0; q < host_.size(); ++q) {
      const size_t want = size_t(recv_counts[size_t(q)]) * bytes, have = size_t(send_counts[0]) * bytes;
      std::memcpy(out, send.data, std::min(want, have));
      if (want > have) std::memset(out + have, 0, want - have);
      out += want;
    }
    return std::make_unique<Done>();
  }
  void all_reduce_sum(mt::DeviceSpan) override { unused(); }
  std::unique_ptr<mt::Request> iall_reduce_sum(mt::DeviceSpan) override { unused(); }
  void reduce_scatter_sum(mt::DeviceSpan, mt::DeviceSpan) override { unused(); }
  void all_gather(mt::DeviceSpan, mt::DeviceSpan) override { unused(); }
  std::unique_ptr<mt::Request> isend(mt::DeviceSpan, int) override { unused(); }
  std::unique_ptr<mt::Request> irecv(mt::DeviceSpan, int) override { unused(); }
  std::unique_ptr<mt::DeviceComm> split_on(const mt::Backend&, int, int) override { unused(); }

 private:
  mutable MirrorHost host_;
  mt::Backend be_ = mt::cpu_backend();
};

// The activation arenas' high water of one step of rank 0 at `ep` expert-parallel ranks.
double measured_activations(const mt::ModelConfig& cfg, int batch, int ep, double bound, mt::Recompute recompute) {
  MirrorDevice group(ep);
  const mt::ShardPlace shard{.ep_rank = 0, .ep_size = ep, .ep_receive_bound = bound, .ep = &group};
  mt::Model model(cfg, 7, group.backend(), {}, 1, shard);
  model.set_recompute(recompute);
  const std::vector<int> tokens = testing::random_tokens(size_t(batch) * cfg.seq_len, cfg.vocab_size, 5);
  mt::accumulate_gradients(model, batch, batch, [&](int, std::vector<int>& in, std::vector<int>& tg) {
    in = tokens;
    tg = tokens;
  });
  return double(model.arena_high_water());
}

mt::Layout one_rank_layout(int ep, double bound, mt::Recompute recompute) {
  mt::Layout l;
  l.zero = 0;
  l.micro_batch = 2;
  l.ep = ep;
  l.ep_receive_bound = bound;
  l.recompute = recompute;
  l.storage = mt::Storage::fp32;
  return l;
}

}  // namespace

TEST_CASE("ep receive bound: the worst case is ep x tokens x min(top_k, local experts); a factor of the average") {
  const mt::EpReceive worst{.ep = 4, .experts = 8, .top_k = 3, .bound = 0};
  CHECK(mt::ep_worst_rows(worst, 10) == 4 * 10 * 2);
  CHECK(mt::ep_average_rows(worst, 10) == 30);
  CHECK(mt::ep_reserved_rows(worst, 10) == 80);
  mt::EpReceive factor = worst;
  factor.bound = 1.25;
  CHECK(mt::ep_reserved_rows(factor, 10) == 38);  // ceil(1.25 x 30)
  factor.bound = 5;
  CHECK(mt::ep_reserved_rows(factor, 10) == 80);  // never more than the worst
  CHECK(mt::ep_bound_for(factor, 10, 31) == doctest::Approx(1.04));
  CHECK(mt::ep_bound_for(factor, 10, 30) == doctest::Approx(1.0));
}

TEST_CASE("ep receive bound: the storage model counts what a step's arenas hold at ep = 2 and 4") {
  mt::ModelConfig cfg = testing::tiny_model();
  cfg.seq_len = 64;  // enough rows that the arenas' 64-byte rounding of each tensor is noise
  cfg.moe.n_routed_experts = 8;
  for (int ep : {2, 4})
    for (double bound : {0.0, 1.5, 3.0})
      for (mt::Recompute recompute : {mt::Recompute::none, mt::Recompute::full}) {
        CAPTURE(ep);
        CAPTURE(bound);
        const std::string mode = mt::name_of(recompute);
        CAPTURE(mode);
        const mt::RankMemory planned = mt::trainer_memory(cfg, 2, one_rank_layout(ep, bound, recompute));
        CHECK(planned.activations == doctest::Approx(measured_activations(cfg, 2, ep, bound, recompute)).epsilon(0.02));
        CHECK(planned.ep_headroom > 0);
      }
}

TEST_CASE("ep receive bound: DeepSeek-V3 at ep = 64 reserves 32 times the average arrivals, computed without running") {
  // The report's layout: 16 pipeline stages, 64-way expert parallelism, ZeRO-1 data parallelism.
  const mt::Config c = mt::load_config("configs/deepseek-v3.toml", {"parallel.pp=16", "parallel.dp=128",
                                       "parallel.ep=64", "parallel.zero=1", "parallel.schedule=dualpipe",
                                       "parallel.ep_receive_bound=\"worst\""});
  mt::Layout l = mt::layout_of_config(c);
  l.storage = mt::Storage::mixed;
  REQUIRE(l.ep == 64);
  // 256 experts, 4 per rank, top 8: every token of every peer can bring 4 rows, 64 x 4 per token.
  const int tokens = l.micro_batch * c.model.seq_len / l.tp;
  const mt::EpReceive r{.ep = 64, .experts = 256, .top_k = 8, .bound = 0};
  CHECK(mt::ep_reserved_rows(r, tokens) == 64L * tokens * 4);
  CHECK(mt::ep_rows_per_token(c.model, l) == 256);
  const mt::RankMemory worst = mt::trainer_memory(c.model, c.training.global_batch, l);
  l.ep_receive_bound = 1;  // room for the average only: what the storage model counted before
  const mt::RankMemory average = mt::trainer_memory(c.model, c.training.global_batch, l);
  CHECK(mt::ep_rows_per_token(c.model, l) == 8);
  CHECK(average.ep_headroom == 0);
  CHECK(worst.ep_headroom == doctest::Approx(worst.activations - average.activations));
  CHECK(worst.activations > 4 * average.activations);
}
