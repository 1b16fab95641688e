#include "ops/attention/cudnn_choice.hpp"

#include <bit>
#include <cstdint>

namespace mt {

const char* attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::automatic: return "auto";
    case AttentionImpl::cudnn: return "cudnn";
    case AttentionImpl::own: return "own";
  }
  return "?";
}

size_t SdpaKeyHash::operator()(const SdpaKey& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  for (uint64_t v : {uint64_t(k.batch), uint64_t(k.heads), uint64_t(k.kv_heads), uint64_t(k.seq), uint64_t(k.qk_dim),
                     uint64_t(k.v_dim), uint64_t(std::bit_cast<uint32_t>(k.scale)), uint64_t(k.backward)})
    h = (h ^ v) * 1099511628211ull;
  return size_t(h);
}

std::string sdpa_key_text(const SdpaKey& k) {
  return "b=" + std::to_string(k.batch) + " h=" + std::to_string(k.heads) + "/" + std::to_string(k.kv_heads) +
         " s=" + std::to_string(k.seq) + " d=" + std::to_string(k.qk_dim) + "/" + std::to_string(k.v_dim) +
         (k.backward ? " backward" : " forward");
}

std::string sdpa_unsupported(const SdpaKey& k, int sm, int version) {
  const std::string dims = "head dims " + std::to_string(k.qk_dim) + "/" + std::to_string(k.v_dim);
  if (version < 90000) return "cuDNN " + std::to_string(version) + " is older than 9.0";
  if (sm < 80) return "compute capability " + std::to_string(sm / 10) + "." + std::to_string(sm % 10) + " < 8.0";
  if (k.backward && (version == 91000 || version == 91001)) return "cuDNN 9.10.0/9.10.1 backward has known bugs";
  if (k.seq < 2) return "sequence length 1";
  if (k.kv_heads <= 0 || k.heads % k.kv_heads != 0) return "heads not a multiple of key/value heads";
  if (k.qk_dim % 8 != 0 || k.v_dim % 8 != 0) return dims + " not multiples of 8";
  if (sm / 10 == 9) return k.qk_dim > 256 || k.v_dim > 256 ? dims + " over 256 (Hopper's limit)" : "";
  // Blackwell: equal dims up to 128, or DeepSeek's 192/128.
  if (sm / 10 == 10 && k.qk_dim == 192 && k.v_dim == 128) return "";
  return k.qk_dim > 128 || k.v_dim > 128 ? dims + " over 128 (this GPU's limit)" : "";
}

AttentionRoute choose_attention(AttentionImpl want, bool bf16_inputs, const std::string& library_missing,
                                const std::string& unsupported) {
  if (want == AttentionImpl::own) return {false, false, "precision.attention = \"own\""};
  std::string why;
  if (!bf16_inputs) why = "fp32 products (cuDNN's attention takes bf16)";
  else if (!library_missing.empty()) why = library_missing;
  else if (!unsupported.empty()) why = "cuDNN does not run this shape: " + unsupported;
  if (why.empty()) return {true, false, ""};
  return {false, want == AttentionImpl::cudnn, why};
}

}  // namespace mt
