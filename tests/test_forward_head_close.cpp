// With the heads in chunks a training forward takes their gradients as one group for the ZeRO
// holder (the head, the final norm and each MTP output norm). The forward closes the group itself,
// or, deferred, leaves it open for its caller: DualPipe's pair closes it from the step's thread
// after both passes, so the forward's thread never calls the data-parallel communicator.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/model.hpp"
#include "test_helpers.hpp"

namespace {

// A holder that records the groups opened and the closes, and lends nothing.
struct Recorder final : mt::ParamShards {
  std::vector<std::vector<int>> opened;
  int closes = 0;
  void open(int, const std::vector<int>& ids) override { opened.push_back(ids); }
  void close(int) override { ++closes; }
  void gather(int, const std::vector<int>&) override {}
  void release(int) override {}
};

void forward(mt::Model& model, int batch) {
  const mt::ModelConfig& m = model.config();
  const size_t n = size_t(batch * m.seq_len);
  const std::vector<int> inputs = testing::random_tokens(n, m.vocab_size, 3);
  const std::vector<int> targets = testing::random_tokens(n, m.vocab_size, 4);
  model.forward(0, {inputs.data(), targets.data(), batch}, {1.0f / float(n), 0.1f, 0.2f});
}

}  // namespace

TEST_CASE("forward head close: the chunked heads' gradients are one group, closed by the forward or its caller") {
  testing::StrictDevice dev;
  mt::ModelConfig m = testing::tiny_model();
  m.mtp.depth = 2;
  m.head_chunk_tokens = 3;  // 10 rows: chunks of 3, 3, 3, 1
  mt::Model model(m, 5, dev.be, {}, 1);
  Recorder holder;
  model.set_shards(&holder, false);
  const std::vector<int> group{model.head, model.final_norm, model.mtp[0].out_norm, model.mtp[1].out_norm};

  forward(model, 2);
  REQUIRE(holder.opened.size() == 1);
  CHECK(holder.opened[0] == group);
  CHECK(holder.closes == 1);
  model.retire(0);

  model.defer_forward_close(true);
  forward(model, 2);
  CHECK(holder.opened.size() == 2);
  CHECK(holder.closes == 1);  // left open for the caller
  model.close_forward_gradients(0);
  CHECK(holder.closes == 2);
  model.retire(0);
  model.set_shards(nullptr, false);
}
