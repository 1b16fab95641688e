// The training order (file order or shuffled per epoch) and the validation windows.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "io/shards.hpp"
#include "test_helpers.hpp"
#include "train/batches.hpp"
#include "train/data_order.hpp"

namespace {

std::vector<long long> epoch_of(const mt::WindowOrder& order, long long epoch) {
  std::vector<long long> out;
  for (long long p = 0; p < order.windows(); ++p) out.push_back(order.window(epoch * order.windows() + p));
  return out;
}

}  // namespace

TEST_CASE("data order: each epoch reads every window exactly once, for any number of windows") {
  for (long long windows : {1, 2, 3, 4, 5, 7, 16, 17, 63, 64, 65, 1000, 4097}) {
    const mt::WindowOrder order(windows, true, 1234);
    for (long long epoch : {0, 1, 7}) {
      const std::vector<long long> seen = epoch_of(order, epoch);
      const std::set<long long> distinct(seen.begin(), seen.end());
      CHECK_MESSAGE(distinct.size() == size_t(windows), windows << " windows, epoch " << epoch);
      CHECK(*distinct.begin() == 0);
      CHECK(*distinct.rbegin() == windows - 1);
    }
  }
}

TEST_CASE("data order: the seed and the epoch pick the permutation; the same ones give the same order") {
  const mt::WindowOrder a(1000, true, 1234), same(1000, true, 1234), other_seed(1000, true, 1235);
  CHECK(epoch_of(a, 0) == epoch_of(same, 0));
  CHECK(epoch_of(a, 3) == epoch_of(same, 3));
  CHECK(epoch_of(a, 0) != epoch_of(other_seed, 0));
  CHECK(epoch_of(a, 0) != epoch_of(a, 1));
  // Shuffled: few windows stay in place (about one expected) and neighbours rarely stay neighbours.
  const std::vector<long long> first = epoch_of(a, 0);
  int fixed = 0, adjacent = 0;
  for (size_t p = 0; p < first.size(); ++p) {
    fixed += first[p] == (long long)p;
    if (p > 0) adjacent += first[p] == first[p - 1] + 1;
  }
  CHECK(fixed < 10);
  CHECK(adjacent < 10);
}

// tests/oracle/data_order.py computes the order again from its definition; these are its values
// (`python3 tests/oracle/data_order.py 1234 10 20` and `... 7 1000 8`).
TEST_CASE("data order: the windows the Python rewrite of the order computes") {
  const mt::WindowOrder small(10, true, 1234), large(1000, true, 7);
  std::vector<long long> got;
  for (long long i = 0; i < 20; ++i) got.push_back(small.window(i));
  CHECK(got == std::vector<long long>{8, 7, 1, 5, 6, 2, 4, 0, 9, 3, 1, 5, 3, 2, 9, 7, 6, 0, 8, 4});
  got.clear();
  for (long long i = 0; i < 8; ++i) got.push_back(large.window(i));
  CHECK(got == std::vector<long long>{625, 428, 262, 188, 604, 845, 867, 940});
}

TEST_CASE("data order: in file order sequence i reads window i mod W") {
  const mt::WindowOrder order(7, false, 1234);
  for (long long i = 0; i < 30; ++i) CHECK(order.window(i) == i % 7);
}

TEST_CASE("validation windows spread evenly over the stream, the same in any chunks") {
  const std::string dir = testing::temp_dir("data_order_spread");
  std::vector<uint16_t> tokens(101);  // 20 whole windows of 5 (+1) tokens
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t(i);
  mt::write_shard(dir + "/v.bin", tokens);
  const mt::TokenStream stream(dir + "/v.bin", "data.val", 200);
  const mt::Batches val(stream, 5, "data.val");
  REQUIRE(val.windows() == 20);
  std::vector<int> in, tg;
  val.fill_spread(0, 4, 4, in, tg);  // windows 0, 5, 10, 15
  CHECK(in == std::vector<int>{0, 1, 2, 3, 4, 25, 26, 27, 28, 29, 50, 51, 52, 53, 54, 75, 76, 77, 78, 79});
  CHECK(tg[5] == 26);
  std::vector<int> part;
  for (int first = 0; first < 4; first += 3) {  // chunks of 3 and 1
    val.fill_spread(first, std::min(3, 4 - first), 4, in, tg);
    part.insert(part.end(), in.begin(), in.end());
  }
  val.fill_spread(0, 4, 4, in, tg);
  CHECK(part == in);
}
