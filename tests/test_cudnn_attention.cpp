// The choice between cuDNN's attention and the own kernels, the per-shape graph cache and the run-time
// loading of libcudnn: plain C++, checked without a GPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "ops/attention/cudnn_choice.hpp"
#include "ops/attention/cudnn_loader.hpp"

using namespace mt;

namespace {

SdpaKey mla_key() { return {.batch = 2, .heads = 16, .kv_heads = 16, .seq = 4096, .qk_dim = 192, .v_dim = 128,
                            .scale = 0.0721f, .backward = true}; }

}  // namespace

TEST_CASE("sdpa key: every field tells shapes apart, equal keys hash alike") {
  const SdpaKey a = mla_key();
  SdpaKeyHash hash;
  CHECK(hash(a) == hash(SdpaKey(a)));
  for (int field = 0; field < 8; ++field) {
    SdpaKey b = a;
    switch (field) {
      case 0: b.batch = 3; break;
      case 1: b.heads = 32; break;
      case 2: b.kv_heads = 4; break;
      case 3: b.seq = 2048; break;
      case 4: b.qk_dim = 128; break;
      case 5: b.v_dim = 192; break;
      case 6: b.scale = 0.125f; break;
      default: b.backward = false; break;
    }
    CHECK_FALSE(a == b);
    CHECK(hash(a) != hash(b));
  }
  CHECK(sdpa_key_text(a) == "b=2 h=16/16 s=4096 d=192/128 backward");
}

TEST_CASE("sdpa support: MLA's 192/128 and GQA on Hopper, the documented limits elsewhere") {
  SdpaKey k = mla_key();
  CHECK(sdpa_unsupported(k, 90, 92600).empty());
  CHECK(sdpa_unsupported(k, 100, 92600).empty());  // Blackwell runs DeepSeek's 192/128
  CHECK(sdpa_unsupported(k, 80, 92600).find("over 128") != std::string::npos);
  k.kv_heads = 4;
  CHECK(sdpa_unsupported(k, 90, 92600).empty());
  k.kv_heads = 5;
  CHECK(sdpa_unsupported(k, 90, 92600).find("multiple of key/value heads") != std::string::npos);
  SdpaKey gpt2{.batch = 8, .heads = 12, .kv_heads = 12, .seq = 1024, .qk_dim = 64, .v_dim = 64, .scale = 0.125f};
  CHECK(sdpa_unsupported(gpt2, 80, 90100).empty());
  CHECK(sdpa_unsupported(gpt2, 75, 92600).find("compute capability 7.5") != std::string::npos);
  CHECK(sdpa_unsupported(gpt2, 90, 8907).find("older than 9.0") != std::string::npos);
  gpt2.qk_dim = gpt2.v_dim = 36;
  CHECK(sdpa_unsupported(gpt2, 90, 92600).find("multiples of 8") != std::string::npos);
  gpt2.qk_dim = gpt2.v_dim = 264;
  CHECK(sdpa_unsupported(gpt2, 90, 92600).find("over 256") != std::string::npos);
  gpt2.qk_dim = gpt2.v_dim = 64, gpt2.seq = 1;
  CHECK_FALSE(sdpa_unsupported(gpt2, 90, 92600).empty());
  gpt2.seq = 64, gpt2.backward = true;
  CHECK(sdpa_unsupported(gpt2, 90, 91000).find("9.10") != std::string::npos);
  CHECK(sdpa_unsupported(gpt2, 90, 91002).empty());
}

TEST_CASE("attention route: auto falls back with the reason, cudnn turns the reason into an error") {
  CHECK(choose_attention(AttentionImpl::automatic, true, "", "").cudnn);
  CHECK(choose_attention(AttentionImpl::cudnn, true, "", "").cudnn);
  const AttentionRoute own = choose_attention(AttentionImpl::own, true, "", "");
  CHECK_FALSE(own.cudnn);
  CHECK_FALSE(own.error);
  const AttentionRoute fp32 = choose_attention(AttentionImpl::automatic, false, "", "");
  CHECK_FALSE(fp32.cudnn);
  CHECK_FALSE(fp32.error);
  CHECK(fp32.why.find("fp32") != std::string::npos);
  const AttentionRoute missing = choose_attention(AttentionImpl::automatic, true, "libcudnn.so.9 not found", "");
  CHECK_FALSE(missing.cudnn);
  CHECK_FALSE(missing.error);
  CHECK(missing.why == "libcudnn.so.9 not found");
  const AttentionRoute asked = choose_attention(AttentionImpl::cudnn, true, "", "head dims 264/264 over 256");
  CHECK_FALSE(asked.cudnn);
  CHECK(asked.error);
  CHECK(asked.why.find("264/264") != std::string::npos);
  CHECK(std::string(attention_impl_name(AttentionImpl::automatic)) == "auto");
}

TEST_CASE("sdpa cache: one build per shape, refusals remembered with their reason") {
  struct Plan {
    int id;
  };
  SdpaCache<Plan> cache;
  int made = 0;
  auto make = [&](const SdpaKey& k, std::string* why) -> std::unique_ptr<Plan> {
    ++made;
    if (k.qk_dim > 256) {
      *why = "refused";
      return nullptr;
    }
    return std::make_unique<Plan>(Plan{made});
  };
  SdpaKey a = mla_key(), b = a;
  b.backward = false;
  std::string why;
  Plan* pa = cache.get(a, make, &why);
  REQUIRE(pa != nullptr);
  CHECK(cache.get(a, make, &why) == pa);
  CHECK(cache.get(b, make, &why) != pa);
  CHECK(made == 2);
  SdpaKey wide = a;
  wide.qk_dim = 320;
  CHECK(cache.get(wide, make, &why) == nullptr);
  CHECK(why == "refused");
  why.clear();
  CHECK(cache.get(wide, make, &why) == nullptr);
  CHECK(why == "refused");
  CHECK(made == 3);
  CHECK(cache.builds() == 3);
  int listed = 0, refused = 0;
  cache.each([&](const SdpaKey&, bool ready, const std::string&) { ++listed, refused += !ready; });
  CHECK(listed == 3);
  CHECK(refused == 1);
}

TEST_CASE("cudnn loader: a missing or foreign library is refused with its reason") {
  std::string why;
  CHECK_FALSE(load_cudnn("/nonexistent/libcudnn.so.9", &why));
  CHECK(why.find("could not be loaded") != std::string::npos);
  CHECK_FALSE(load_cudnn("libm.so.6", &why));
  CHECK(why.find("is not cuDNN") != std::string::npos);
  CHECK(cudnn_version_text(92600) == "9.26.0");
}

TEST_CASE("cudnn loader: the wheel's libcudnn opens without a GPU and reports version 9") {
  namespace fs = std::filesystem;
  std::string path;
  if (fs::exists(".venv/lib"))
    for (const auto& e : fs::directory_iterator(".venv/lib")) {
      const fs::path lib = e.path() / "site-packages/nvidia/cudnn/lib/libcudnn.so.9";
      if (fs::exists(lib)) path = lib.string();
    }
  if (path.empty()) {
    MESSAGE("no nvidia-cudnn-cu13 wheel in .venv: nothing to open");
    return;
  }
  std::string why;
  const auto lib = load_cudnn(path, &why);
  REQUIRE_MESSAGE(lib, why);
  CHECK(lib->version >= 90000);
  CHECK(lib->handle != nullptr);
}
