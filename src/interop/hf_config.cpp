#include "interop/hf_config.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "util/error.hpp"

namespace mt {

namespace {

// A value as config.json has it, for messages.
std::string shown(const Json& v) {
  switch (v.kind) {
    case Json::Kind::null: return "null";
    case Json::Kind::boolean: return v.boolean ? "true" : "false";
    case Json::Kind::number:
      return v.number == std::floor(v.number) && std::fabs(v.number) < 1e15 ? std::to_string((long long)v.number)
                                                                              : json_float(v.number);
    case Json::Kind::string: return "\"" + v.string + "\"";
    case Json::Kind::array: return "[...]";
    case Json::Kind::object: return "{...}";
  }
  return "";
}

// Python's truth of a JSON value, as transformers' `if config.key:` reads it.
bool truthy(const Json& v) {
  switch (v.kind) {
    case Json::Kind::null: return false;
    case Json::Kind::boolean: return v.boolean;
    case Json::Kind::number: return v.number != 0;
    case Json::Kind::string: return !v.string.empty();
    case Json::Kind::array: return !v.array.empty();
    case Json::Kind::object: return !v.object.empty();
  }
  return false;
}

// The keys of one JSON object (config.json, or its RoPE table named `prefix`).
class Keys {
 public:
  Keys(const Json& object, std::string where, std::string prefix)
      : o_(object), where_(std::move(where)), prefix_(std::move(prefix)) {}

  const Json* find(const std::string& key) const { return o_.has(key) ? &o_.object.at(key) : nullptr; }
  bool present(const std::string& key) const { return find(key) && find(key)->kind != Json::Kind::null; }

  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    const Json* v = find(key);
    throw UserError(where_ + ": " + prefix_ + key + " = " + (v ? shown(*v) : "(absent)") + ": " + why);
  }
  [[noreturn]] void missing(const std::string& key, const std::string& why) const {
    throw UserError(where_ + ": no \"" + prefix_ + key + "\": " + why);
  }

  // A whole number >= `least`; absent (or null where `null_is_absent`) gives `fallback`, and
  // without one the key is required.
  long long whole(const std::string& key, std::optional<long long> fallback, long long least = 1,
                  bool null_is_absent = false) const {
    const Json* v = find(key);
    if (!v || (null_is_absent && v->kind == Json::Kind::null)) {
      if (!fallback) missing(key, "moetrain needs the model's sizes written out, not transformers' defaults");
      return *fallback;
    }
    if (v->kind != Json::Kind::number || v->number != std::floor(v->number) || v->number < double(least) ||
        v->number > 2147483647.0)
      refuse(key, "expected a whole number from " + std::to_string(least) + " to 2147483647");
    return (long long)v->number;
  }
  double real(const std::string& key, double fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (v->kind != Json::Kind::number || !std::isfinite(v->number)) refuse(key, "expected a number");
    return v->number;
  }
  // `key`'s truth in transformers' terms; absent: `fallback`.
  bool flag(const std::string& key, bool fallback) const { return find(key) ? truthy(*find(key)) : fallback; }
  std::string text(const std::string& key, const std::string& fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (v->kind != Json::Kind::string) refuse(key, "expected a string");
    return v->string;
  }

 private:
  const Json& o_;
  std::string where_, prefix_;
};

// moetrain's mscale and mscale_all_dim for transformers' YaRN entries: the factor on cos and sin
// as transformers computes it (attention_factor, else m(mscale)/m(mscale_all_dim) where both are
// set, else m(1)) and, DeepSeek-V3 only, the softmax scale's m(mscale_all_dim)^2.
std::pair<double, double> yarn_mscales(const Keys& rope, double factor, bool deepseek) {
  auto m = [&](double x) { return factor > 1 ? 0.1 * x * std::log(factor) + 1.0 : 1.0; };
  auto real_or_zero = [&](const char* key) { return rope.present(key) ? rope.real(key, 0.0) : 0.0; };
  const double ms = real_or_zero("mscale"), all = real_or_zero("mscale_all_dim");
  const double cos_sin = rope.present("attention_factor") ? rope.real("attention_factor", 1.0)
                         : ms != 0 && all != 0                ? m(ms) / m(all)
                                                              : m(1);
  const double kept = deepseek ? all : 0.0;
  if (factor <= 1) return {1.0, kept};
  return {(cos_sin * m(kept) - 1.0) / (0.1 * std::log(factor)), kept};
}

// The [model.rope_scaling] lines (empty without scaling) and rope_theta, as transformers'
// standardize_rope_params settles them: rope_scaling over rope_parameters, the table's rope_theta
// over the top level's, a top-level original_max_position_embeddings over the table's, and
// max_position_embeddings where neither has one.
std::string rope_toml(const Json& c, const Keys& top, const std::string& where, bool deepseek, long long max_positions,
                      std::string* theta_line) {
  const Json* table = nullptr;
  std::string name;
  for (const char* key : {"rope_scaling", "rope_parameters"})
    if (top.present(key) && !table) {
      table = &c.object.at(key);
      name = key;
      if (table->kind != Json::Kind::object) top.refuse(key, "expected a table (or null)");
    }
  Json empty;
  empty.kind = Json::Kind::object;
  const Json* source = table ? table : &empty;
  const Keys rope(*source, where, name + ".");
  for (const auto& [key, value] : source->object)
    if (value.kind == Json::Kind::object)
      rope.refuse(key, "RoPE parameters per layer type; moetrain runs one RoPE in every layer");
  const double theta = rope.present("rope_theta") ? rope.real("rope_theta", 0) : top.real("rope_theta", 10000.0);
  if (!(theta > 1)) (rope.present("rope_theta") ? rope : top).refuse("rope_theta", "expected a base above 1");
  *theta_line = "rope_theta = " + json_float(theta) + "\n";
  const std::string type = rope.find("rope_type") ? rope.text("rope_type", "default") : rope.text("type", "default");
  if (type == "default") return "";
  if (type != "yarn")
    rope.refuse(rope.find("rope_type") ? "rope_type" : "type", "moetrain has plain RoPE (\"default\") and \"yarn\"");
  // Plain RoPE ignores partial_rotary_factor in both classes; their YaRN rotates that part only.
  for (const Keys* k : {&rope, &top})
    if (k->present("partial_rotary_factor") && k->real("partial_rotary_factor", 1) != 1.0)
      k->refuse("partial_rotary_factor", "moetrain's YaRN rotates every RoPE feature of a head (1.0)");
  if (!rope.present("factor")) rope.missing("factor", "YaRN's context extension factor is needed");
  const double factor = rope.real("factor", 1);
  const long long original = top.present("original_max_position_embeddings")
                                 ? top.whole("original_max_position_embeddings", {})
                                 : rope.whole("original_max_position_embeddings", max_positions, 1, true);
  if (rope.find("truncate") && !truthy(*rope.find("truncate")))
    rope.refuse("truncate", "moetrain's YaRN rounds its correction range outward (truncate = true, the default)");
  // transformers reads `beta_fast or 32`: absent, null and 0 all give the default.
  const double beta_fast = rope.flag("beta_fast", false) ? rope.real("beta_fast", 32) : 32.0;
  const double beta_slow = rope.flag("beta_slow", false) ? rope.real("beta_slow", 1) : 1.0;
  const auto [mscale, mscale_all_dim] = yarn_mscales(rope, factor, deepseek);
  return "[model.rope_scaling]\nkind = \"yarn\"\nfactor = " + json_float(factor) +
         "\noriginal_seq_len = " + std::to_string(original) + "\nbeta_fast = " + json_float(beta_fast) +
         "\nbeta_slow = " + json_float(beta_slow) + "\nmscale = " + json_float(mscale) +
         "\nmscale_all_dim = " + json_float(mscale_all_dim) + "\n";
}

// Keys both classes read alike: refused where moetrain's model differs.
void check_common(const Keys& k, bool deepseek) {
  const std::string act = k.text("hidden_act", "silu");
  if (act != "silu" && act != "swish") k.refuse("hidden_act", "moetrain's feed-forward is SwiGLU (silu)");
  if (k.flag("attention_bias", false)) k.refuse("attention_bias", "moetrain's attention projections have no bias");
  if (!deepseek && k.flag("mlp_bias", false)) k.refuse("mlp_bias", "moetrain's feed-forward projections have no bias");
  if (k.flag("tie_word_embeddings", false))
    k.refuse("tie_word_embeddings", "moetrain's output head is its own matrix, trained apart from the embedding");
  if (k.flag("attention_dropout", false)) k.refuse("attention_dropout", "moetrain trains without dropout");
}

// DeepSeek's own keys that transformers' class ignores, refused where DeepSeek's code would
// compute something else than DeepSeek-V3's routing.
void check_deepseek_routing(const Keys& k) {
  if (!k.flag("norm_topk_prob", true))
    k.refuse("norm_topk_prob", "moetrain's gates are always normalised over the chosen experts");
  if (k.text("scoring_func", "sigmoid") != "sigmoid")
    k.refuse("scoring_func", "moetrain routes by sigmoid affinities, as DeepSeek-V3 does");
  if (k.text("topk_method", "noaux_tc") != "noaux_tc")
    k.refuse("topk_method", "moetrain chooses experts by group-limited, bias-corrected top-k (noaux_tc)");
  if (k.present("moe_layer_freq") && k.whole("moe_layer_freq", 1) != 1)
    k.refuse("moe_layer_freq", "every block after first_k_dense_replace is MoE in moetrain (1)");
}

}  // namespace

std::string json_float(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
  // Python's repr: the fewest significant digits that read back, positional for exponents -4..15.
  char buf[48];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 16) return buf;  // "1e-06", "1.5e+20" as Python writes them
  std::snprintf(buf, sizeof buf, "%.*f", std::max(0, digits - 1 - exponent), v);
  std::string s = buf;
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

HfModel hf_model_of(const Json& c, const std::string& where) {
  if (c.kind != Json::Kind::object) throw UserError(where + ": expected a JSON object");
  const Keys k(c, where, "");
  const std::string type = k.text("model_type", "");
  HfModel out;
  out.deepseek = type == "deepseek_v3";
  if (!out.deepseek && type != "llama")
    k.refuse("model_type", "moetrain imports deepseek_v3 (DeepseekV3ForCausalLM) and llama (LlamaForCausalLM)");
  const bool deepseek = out.deepseek;
  check_common(k, deepseek);
  const long long layers = k.whole("num_hidden_layers", {}), heads = k.whole("num_attention_heads", {});
  const long long hidden = k.whole("hidden_size", {}), vocab = k.whole("vocab_size", {});
  const long long max_positions = k.whole("max_position_embeddings", deepseek ? 4096 : 2048);
  const long long dense = deepseek ? std::min(k.whole("first_k_dense_replace", 3, 0), layers) : layers;
  // DeepseekV3's intermediate_size sizes only its dense blocks.
  const long long ffn = k.whole("intermediate_size", dense > 0 ? std::nullopt : std::optional<long long>(18432));
  const double eps = k.real("rms_norm_eps", 1e-6);
  if (!(eps > 0 && eps < 1)) k.refuse("rms_norm_eps", "expected a number in (0, 1)");
  // DeepseekV3's q_a_layernorm and kv_a_layernorm keep RMSNorm's default 1e-6 whatever
  // rms_norm_eps says (as DeepSeek's own code does); moetrain's model has one epsilon for all.
  if (deepseek && eps != 1e-6)
    k.refuse("rms_norm_eps", "DeepseekV3's latent norms keep 1e-6 and moetrain has one epsilon for every norm, "
                             "so it imports 1e-6 only");
  std::string theta_line;
  const std::string rope = rope_toml(c, k, where, deepseek, max_positions, &theta_line);
  std::ostringstream t;
  t << "[model]\nvocab_size = " << vocab << "\nd_model = " << hidden << "\nn_layers = " << layers
    << "\nn_dense_layers = " << dense << "\nn_heads = " << heads << "\nhead_dim = "
    << (deepseek ? 2 * std::max(1LL, hidden / heads / 2) : k.whole("head_dim", hidden / heads, 1, true))
    << "\nffn_hidden = " << ffn << "\nseq_len = " << max_positions << "\nnorm_eps = " << json_float(eps) << "\n"
    << theta_line;
  if (deepseek) {
    // MLA's keys and values come from one latent per token for all heads; transformers'
    // attention repeats them by num_attention_heads / num_key_value_heads, which only 1 leaves right.
    if (k.present("num_key_value_heads") && k.whole("num_key_value_heads", heads) != heads)
      k.refuse("num_key_value_heads", "MLA expands its latent to every head: it must equal num_attention_heads = " +
                                          std::to_string(heads));
    out.rope_halves = !k.flag("rope_interleave", true);
    t << "[model.attention]\nkind = \"mla\"\nq_lora_rank = "
      << (k.find("q_lora_rank") && k.find("q_lora_rank")->kind == Json::Kind::null ? 0 : k.whole("q_lora_rank", {}))
      << "\nkv_lora_rank = " << k.whole("kv_lora_rank", {})
      << "\nqk_nope_head_dim = " << k.whole("qk_nope_head_dim", {})
      << "\nqk_rope_head_dim = " << k.whole("qk_rope_head_dim", {}) << "\nv_head_dim = " << k.whole("v_head_dim", {})
      << "\n";
    if (layers > dense) {
      check_deepseek_routing(k);
      t << "[model.moe]\nn_routed_experts = " << k.whole("n_routed_experts", {})
        << "\nn_shared_experts = " << k.whole("n_shared_experts", 1, 0)
        << "\ntop_k = " << k.whole("num_experts_per_tok", 8)
        << "\nexpert_hidden = " << k.whole("moe_intermediate_size", {})
        << "\nroute_scale = " << json_float(k.real("routed_scaling_factor", 2.5))
        << "\nn_groups = " << k.whole("n_group", 8) << "\ntopk_groups = " << k.whole("topk_group", 4) << "\n";
    }
  } else {
    t << "[model.attention]\nkind = \"mha\"\nn_kv_heads = " << k.whole("num_key_value_heads", heads, 1, true) << "\n";
  }
  out.toml = t.str() + rope;
  return out;
}

}  // namespace mt
