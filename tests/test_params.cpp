// Initial parameter values: the same bits on any number of threads and for any range drawn,
// each element the draw of (seed, name, global index).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "model/param_init.hpp"
#include "test_helpers.hpp"

namespace {

using Init = mt::ParamStore::Init;

struct Declared {
  const char* name;
  std::vector<int64_t> shape;
  Init init;
  mt::Split split;
};

// Every init kind, whole and split along the first, a middle and the last dimension, over
// several of the blocks the threads take (65536 elements each).
const std::vector<Declared> kDeclared = {
    {"embedding", {300, 256}, Init::normal, {}},
    {"norm", {256}, Init::ones, {}},
    {"experts", {16, 256, 128}, Init::normal, {0, 4, 3}},
    {"bias", {100}, Init::zeros, {}},
    {"heads", {6, 96, 40}, Init::normal, {1, 4, 2}},
    {"columns", {50, 32, 160}, Init::normal, {2, 2, 1}},
    {"rows", {12, 64, 40}, Init::normal, {0, 3, 1}},
};
// Past the 2^24 elements that finalize draws at a time: a piece boundary inside a normal parameter.
const std::vector<Declared> kLarge = {
    {"filler", {4095, 4096}, Init::zeros, {}},
    {"across", {8, 1024}, Init::normal, {}},
    {"norm", {4096}, Init::ones, {}},
    {"half", {64, 64}, Init::normal, {1, 2, 1}},
};
constexpr uint64_t kSeed = 17;
constexpr double kStd = 0.02;

mt::ParamStore store_of(const std::vector<Declared>& params) {
  mt::ParamStore p;
  for (const Declared& d : params) p.add(d.name, d.shape, d.init, true, mt::Spread::tensor_split, d.split);
  return p;
}

// Built on `threads` threads, with its gradients checked to start at zero.
std::vector<float> built_values(const std::vector<Declared>& params, const mt::Backend& be, int threads) {
  mt::ParamStore p = store_of(params);
  p.finalize(be, kSeed, kStd, threads);
  const std::vector<float> grads = p.host_grads();
  CHECK(std::all_of(grads.begin(), grads.end(), [](float g) { return g == 0.0f; }));
  return p.host_values();
}

// Elements that differ from the draw of (seed, name, global index), computed one by one.
size_t wrong_elements(const std::vector<Declared>& params, const std::vector<float>& values) {
  const mt::ParamStore p = store_of(params);
  size_t wrong = 0;
  for (size_t i = 0; i < p.infos.size(); ++i) {
    const mt::ParamInfo& info = p.infos[i];
    const uint64_t key = mt::param_key(kSeed, info.name);
    for (size_t j = 0; j < info.numel; ++j) {
      const float want = params[i].init == Init::normal ? float(mt::counter_normal(key, info.global_index(j)) * kStd)
                         : params[i].init == Init::ones ? 1.0f
                                                        : 0.0f;
      wrong += std::memcmp(&want, &values[info.offset + j], sizeof want) != 0;
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("initial values are the same bits on one thread and on several") {
  testing::StrictDevice dev;
  for (const auto* params : {&kDeclared, &kLarge}) {
    const std::vector<float> one = built_values(*params, dev.be, 1);
    for (int threads : {2, 3, 8}) {
      const std::vector<float> several = built_values(*params, dev.be, threads);
      REQUIRE(several.size() == one.size());
      CHECK(std::memcmp(several.data(), one.data(), one.size() * sizeof(float)) == 0);
    }
    CHECK(wrong_elements(*params, one) == 0);
  }
}

TEST_CASE("any range of the initial values is that part of the whole") {
  const mt::ParamStore p = store_of(kDeclared);
  std::vector<Init> inits;
  for (const Declared& d : kDeclared) inits.push_back(d.init);
  std::vector<float> whole(p.total());
  mt::draw_initial_values(p.infos, inits, kSeed, kStd, 0, p.total(), whole.data(), 1);
  // Ranges that begin and end inside parameters, inside a split parameter's runs, and on one element.
  for (auto [begin, end] : std::vector<std::pair<size_t, size_t>>{{1000, 250001}, {76801, 76900}, {200000, 200001}}) {
    std::vector<float> part(end - begin);
    bool met = false;
    mt::draw_initial_values(p.infos, inits, kSeed, kStd, begin, end, part.data(), 3, [&] { met = true; });
    CHECK(met);
    CHECK(std::memcmp(part.data(), whole.data() + begin, part.size() * sizeof(float)) == 0);
  }
}
