// Time to build an experiment's parameters: the model's declaration and ParamStore::finalize
// (drawing every initial weight) on the CPU backend, one rank holding the whole model. Prints the
// seconds, nanoseconds per parameter and a hash of the values, so two builds of the trainer can
// be compared for speed and for the same numbers.
// Usage: param_init_bench EXP.toml [--set key=value ...]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/model.hpp"
#include "util/error.hpp"

namespace {

// 64-bit FNV-1a over the values' bits, read back in pieces so that no second full copy is held.
uint64_t values_hash(const mt::ParamStore& params) {
  constexpr size_t piece = size_t(1) << 24;
  std::vector<float> host(piece);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t at = 0; at < params.total(); at += piece) {
    const size_t n = std::min(piece, params.total() - at);
    params.backend().download(host.data(), params.values_data() + at, n * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &host[i], sizeof bits);
      h = (h ^ bits) * 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sets;
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--set") sets.push_back(argv[i + 1]);
  if (argc < 2 || sets.size() * 2 + 2 != size_t(argc)) {
    std::fprintf(stderr, "usage: param_init_bench EXP.toml [--set key=value ...]\n");
    return 2;
  }
  try {
    const mt::Config cfg = mt::load_config(argv[1], sets);
    const auto t0 = std::chrono::steady_clock::now();
    const mt::Model model(cfg.model, uint64_t(cfg.run.seed), mt::cpu_backend(), {}, 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const size_t n = model.params.total();
    std::printf("%s: %zu parameters built in %.3f s (%.2f ns per parameter); values hash %016llx\n", argv[1], n, s,
                s * 1e9 / double(n), (unsigned long long)values_hash(model.params));
  } catch (const mt::UserError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
