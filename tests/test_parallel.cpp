// Rank placement, parameter slices and their assembly from checkpoint pieces written by
// another layout.
#include <doctest/doctest.h>

#include <filesystem>

#include "io/h5util.hpp"
#include "io/param_slices.hpp"
#include "parallel/layout.hpp"
#include "util/error.hpp"

namespace {

// A store holding slice `index` of `parts` along `dim` of one parameter of shape `shape`,
// filled with each element's global flat index.
mt::ParamStore sliced(const std::vector<int64_t>& shape, int dim, int parts, int index) {
  mt::ParamStore p;
  p.add("w", shape, mt::ParamStore::Init::zeros, true, mt::Spread::tensor_split, {dim, parts, index});
  p.finalize(mt::cpu_backend(), 1, 1.0);
  std::vector<float> values(p.total());
  for (size_t i = 0; i < p.infos[0].numel; ++i) values[i] = float(p.infos[0].global_index(i));
  p.set_values(values);
  return p;
}

std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("moetrain_test_parallel_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

// Writes each store's slice to its own file; returns the paths.
std::vector<std::string> write_pieces(const std::string& dir, const std::vector<mt::ParamStore>& pieces) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < pieces.size(); ++i) {
    paths.push_back(dir + "/rank_" + std::to_string(i) + ".h5");
    mt::h5::Handle f = mt::h5::create_file(paths.back(), false);
    mt::write_param_slices(f, "/params", pieces[i], pieces[i].host_values(), {0});
  }
  return paths;
}

}  // namespace

TEST_CASE("ranks fill tensor-parallel positions first, then data-parallel ones, then stages") {
  const mt::ParallelLayout l{.dp = 2, .tp = 2, .pp = 2, .ep = 2};
  const mt::RankCoords r5 = mt::coords_of(l, 5);  // 5 = tp 1 + 2 * (dp 0 + 2 * pp 1)
  CHECK(r5.tp == 1);
  CHECK(r5.dp == 0);
  CHECK(r5.pp == 1);
  CHECK(r5.ep == 1);        // stage position 1 of 4, two expert-parallel groups of 2
  CHECK(r5.ep_group == 0);
  const mt::RankCoords r6 = mt::coords_of(l, 6);
  CHECK(r6.ep == 0);
  CHECK(r6.ep_group == 1);
  const std::string text = mt::placement_text(l, 8);
  CHECK(text.find("rank   5: tp 1 dp 0 pp 1 ep 1 (experts 4-7)") != std::string::npos);
  const std::string big = mt::placement_text({.dp = 64, .tp = 8, .pp = 4, .ep = 64}, 256);
  CHECK(big.find("rank  15:") != std::string::npos);
  CHECK(big.find("rank  16:") == std::string::npos);
  CHECK(big.find("... 2032 more") != std::string::npos);
}

TEST_CASE("a slice's elements map to their places in the whole parameter") {
  // [2, 6, 3] split along dimension 1 into 3: slice 1 holds rows 2..3 of each outer block.
  const mt::ParamStore p = sliced({2, 6, 3}, 1, 3, 1);
  const mt::ParamInfo& w = p.infos[0];
  CHECK(w.shape == std::vector<int64_t>{2, 2, 3});
  CHECK(w.global_shape == std::vector<int64_t>{2, 6, 3});
  CHECK(w.global_index(0) == 6);        // (0, 2, 0)
  CHECK(w.global_index(5) == 11);       // (0, 3, 2)
  CHECK(w.global_index(6) == 18 + 6);   // (1, 2, 0)
  // Initialisation draws the whole parameter's numbers: a slice equals the whole's part.
  mt::ParamStore whole, part;
  whole.add("x", {4, 6}, mt::ParamStore::Init::normal, true);
  part.add("x", {4, 6}, mt::ParamStore::Init::normal, true, mt::Spread::tensor_split, {1, 2, 1});
  whole.finalize(mt::cpu_backend(), 7, 0.5);
  part.finalize(mt::cpu_backend(), 7, 0.5);
  const std::vector<float> w_values = whole.host_values(), p_values = part.host_values();
  for (size_t i = 0; i < part.infos[0].numel; ++i) CHECK(p_values[i] == w_values[part.infos[0].global_index(i)]);
}

TEST_CASE("checkpoint pieces of one layout assemble into the slices of another") {
  const std::vector<int64_t> shape{3, 8};
  std::vector<mt::ParamStore> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(sliced(shape, 1, 4, i));
  const std::vector<std::string> files = write_pieces(temp_dir("quarters"), quarters);
  const mt::ParamSlices slices(files);
  SUBCASE("into halves") {
    for (int half = 0; half < 2; ++half) {
      mt::ParamStore mine = sliced(shape, 1, 2, half);
      std::vector<float> read(mine.total(), -1.0f);
      slices.read("/params", mine, read);
      CHECK(read == mine.host_values());
    }
  }
  SUBCASE("into the whole") {
    mt::ParamStore mine = sliced(shape, -1, 1, 0);
    std::vector<float> read(mine.total(), -1.0f);
    slices.read("/params", mine, read);
    CHECK(read == mine.host_values());
  }
  SUBCASE("a missing piece is named") {
    const mt::ParamSlices three({files[0], files[1], files[3]});
    mt::ParamStore mine = sliced(shape, 1, 2, 1);
    std::vector<float> read(mine.total());
    CHECK_THROWS_WITH_AS(three.read("/params", mine, read),
                         "/params/w: the checkpoint holds 6 of the 12 values this rank needs (files missing from the checkpoint directory?)",
                         mt::UserError);
  }
  SUBCASE("another model's shape is refused") {
    mt::ParamStore other = sliced({3, 4}, -1, 1, 0);
    std::vector<float> read(other.total());
    CHECK_THROWS_WITH_AS(slices.read("/params", other, read),
                         doctest::Contains("/params/w has shape [3, 8], this model's is [3, 4]"), mt::UserError);
  }
}

TEST_CASE("a whole checkpoint parameter fills a rank's slice") {
  std::vector<mt::ParamStore> whole;
  whole.push_back(sliced({4, 6}, -1, 1, 0));
  const std::vector<std::string> files = write_pieces(temp_dir("whole"), whole);
  mt::ParamStore mine = sliced({4, 6}, 0, 2, 1);
  std::vector<float> read(mine.total(), -1.0f);
  mt::ParamSlices(files).read("/params", mine, read);
  CHECK(read == mine.host_values());
}
