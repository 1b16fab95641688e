#pragma once
// Which implementation runs a causal attention call on the GPU: cuDNN's fused attention (cudnn-frontend's
// SDPA graph, cudnn_sdpa.cu) or moetrain's own kernels (cuda.cu, cuda_tc.cu), chosen per shape. Plain C++:
// the CUDA backend and the unit tests share it.
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

namespace mt {

// What a run asks for (CudaBackendOptions::attention): cuDNN where it runs the shape and the library
// loads, else the own kernels (automatic); cuDNN or an error (cudnn); the own kernels always (own).
enum class AttentionImpl { automatic, cudnn, own };
const char* attention_impl_name(AttentionImpl impl);

// Everything a cuDNN SDPA graph is built for; one graph per distinct key. The operands reach cuDNN
// staged in packed bfloat16 ([batch*seq, heads, dim], cudnn_attention.cu), so their strides follow
// from these sizes and need no place of their own.
struct SdpaKey {
  int batch = 0, heads = 0, kv_heads = 0, seq = 0, qk_dim = 0, v_dim = 0;
  float scale = 1.0f;
  bool backward = false;
  bool operator==(const SdpaKey&) const = default;
};
struct SdpaKeyHash {
  size_t operator()(const SdpaKey& k) const;
};
// "b=2 h=16/4 s=4096 d=192/128" for notes and the profile.
std::string sdpa_key_text(const SdpaKey& k);

// Why cuDNN `version` (cudnnGetVersion, e.g. 92600) on a GPU of compute capability `sm` (major * 10 + minor)
// cannot run `k`, by the limits cudnn-frontend 1.32 checks for bf16 causal attention, or "" when it can
// (cuDNN may still refuse the graph; the cache then remembers that shape as unsupported).
std::string sdpa_unsupported(const SdpaKey& k, int sm, int version);

// One call's implementation: cuDNN or the own kernels, with the reason when the own kernels run
// under `automatic`, or an error (error true) when `cudnn` was asked for and cannot be had.
struct AttentionRoute {
  bool cudnn = false, error = false;
  std::string why;
};
// `bf16_inputs`: the call rounds its products' inputs to bfloat16 (cuDNN runs nothing else);
// `library_missing`: why libcudnn or the headers are absent ("" when present); `unsupported`: the
// shape's reason from sdpa_unsupported or from cuDNN's refusal ("" when it runs).
AttentionRoute choose_attention(AttentionImpl want, bool bf16_inputs, const std::string& library_missing,
                                const std::string& unsupported);

// Graphs (Plan) per key, made once by the first call for the key; a key whose plan cannot be made keeps
// its reason, so it is neither tried again nor taken for supported.
template <typename Plan>
class SdpaCache {
 public:
  // The plan for k (null, with the reason in *why, when `make` failed now or before). make(k, why)
  // returns a std::unique_ptr<Plan>, null with *why set when cuDNN refuses.
  template <typename Make>
  Plan* get(const SdpaKey& k, Make&& make, std::string* why) {
    auto found = entries_.find(k);
    if (found == entries_.end()) {
      Entry e;
      e.plan = std::forward<Make>(make)(k, &e.why);
      found = entries_.emplace(k, std::move(e)).first;
      ++builds_;
    }
    if (!found->second.plan && why) *why = found->second.why;
    return found->second.plan.get();
  }
  size_t builds() const { return builds_; }
  // Each key with its plan's presence and reason, for the profile's note.
  template <typename Visit>
  void each(Visit&& visit) const {
    for (const auto& [k, e] : entries_) visit(k, e.plan != nullptr, e.why);
  }

 private:
  struct Entry {
    std::unique_ptr<Plan> plan;
    std::string why;
  };
  std::unordered_map<SdpaKey, Entry, SdpaKeyHash> entries_;
  size_t builds_ = 0;
};

}  // namespace mt
