// The FP8 recipes' quantization traffic, counted by hand.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "config/config.hpp"
#include "plan/chunk_compute.hpp"
#include "plan/fp8_recipe.hpp"
#include "test_helpers.hpp"

using namespace mt::plan;
using mt::Layout;
using mt::parse_layout;

TEST_CASE("fp8 recipe: bytes per quantized value, counted by hand") {
  // 128 BF16 values: 256 bytes read; two FP8 copies, each 128 bytes of codes and a 4-byte FP32
  // scale per 128 values: (256 + 2 * (128 + 4)) / 128 = 4.0625.
  CHECK(quantization_bytes(Fp8Recipe::blockwise) == doctest::Approx(4.0625));
  // MXFP8: 32 values share a 1-byte E8M0 scale in each orientation: 2 + 2 * (32 + 1)/32.
  CHECK(quantization_bytes(Fp8Recipe::mxfp8) == doctest::Approx(4.0625));
  // A per-tensor scale is one number per tensor: only the codes.
  CHECK(quantization_bytes(Fp8Recipe::tensor) == 4.0);
}

TEST_CASE("fp8 recipe: names") {
  Fp8Recipe r = Fp8Recipe::tensor;
  CHECK(parse_fp8_recipe("mxfp8", r));
  CHECK(r == Fp8Recipe::mxfp8);
  CHECK(parse_fp8_recipe("blockwise", r));
  CHECK(r == Fp8Recipe::blockwise);
  CHECK_FALSE(parse_fp8_recipe("mx", r));
  CHECK(r == Fp8Recipe::blockwise);
  CHECK(std::string(fp8_recipe_name(Fp8Recipe::mxfp8)) == "mxfp8");
}

TEST_CASE("fp8 recipe: a cluster's recipe sets the quantization time of an FP8 chunk") {
  const mt::Config cfg = mt::load_config("configs/deepseek-v3.toml", {});
  Cluster c = load_cluster("configs/clusters/gb200-nvl72.toml");
  const Layout l = parse_layout("tp=1,pp=4,ep=64,schedule=interleaved,vpp=4,zero=1,mbs=1,recompute=none,fp8=on", 256);
  const double tokens = 4096;
  c.fp8_recipe = Fp8Recipe::tensor;
  const ChunkCompute tensor = chunk_compute(cfg.model, c, l, tokens, 16);
  c.fp8_recipe = Fp8Recipe::mxfp8;
  const ChunkCompute mx = chunk_compute(cfg.model, c, l, tokens, 16);
  // Only the quantization passes differ: the forward's is a tensor-scaled pass's 4.0625/4 - 1 more.
  CHECK(mx.linear_gemms == tensor.linear_gemms);
  CHECK(mx.forward > tensor.forward);
  CHECK(mx.backward > tensor.backward);
  CHECK(mx.forward - tensor.forward < 0.02 * tensor.forward);
}

TEST_CASE("fp8 recipe: a profile's software.fp8_recipe is read and checked") {
  const std::string dir = testing::temp_dir("fp8_recipe");
  std::ifstream in("configs/clusters/gb200-nvl72.toml");
  std::stringstream text;
  text << in.rdbuf();
  auto write = [&](const std::string& line) {
    std::ofstream(dir + "/c.toml") << std::regex_replace(text.str(), std::regex("\\[software\\]"), "[software]\n" + line);
    return dir + "/c.toml";
  };
  CHECK(load_cluster(write("")).fp8_recipe == Fp8Recipe::tensor);
  CHECK(load_cluster(write("fp8_recipe = \"mxfp8\"")).fp8_recipe == Fp8Recipe::mxfp8);
  const std::string e = testing::user_error_of([&] { load_cluster(write("fp8_recipe = \"mx\"")); });
  CHECK(testing::contains(e, "c.toml:"));
  CHECK(testing::contains(e, "software.fp8_recipe = \"mx\" is not one of tensor, blockwise, mxfp8"));
}
