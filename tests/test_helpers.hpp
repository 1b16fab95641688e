#pragma once
// Shared fixtures for the unit tests: a tiny model config and deterministic random data.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "ops/ops.hpp"
#include "tensor/buffer.hpp"
#include "util/error.hpp"
#include "util/init_rng.hpp"

namespace testing {

// The strict CPU backend for a test's lifetime: the layers under test run with their device
// memory unreadable outside op calls, so a host access fails the test with SIGSEGV. Declare it
// before anything that allocates on it.
struct StrictDevice {
  mt::Backend be = mt::cpu_strict_backend_create();
  StrictDevice() = default;
  StrictDevice(const StrictDevice&) = delete;
  StrictDevice& operator=(const StrictDevice&) = delete;
  ~StrictDevice() { mt::cpu_strict_backend_destroy(be); }
  mt::Buffer upload(const std::vector<float>& host) const {
    mt::Buffer b(be, mt::DType::f32, host.size());
    b.from_host(host);
    return b;
  }
  mt::Buffer floats(size_t n) const { return mt::Buffer(be, mt::DType::f32, n); }
};

// A model small enough for float64 finite differences over every parameter tensor, with every
// feature switched on: dense and MoE blocks, shared experts, group-limited routing, balance loss.
inline mt::ModelConfig tiny_model() {
  mt::ModelConfig m;
  m.vocab_size = 11;
  m.d_model = 8;
  m.n_layers = 3;
  m.n_dense_layers = 1;
  m.n_heads = 2;
  m.head_dim = 4;
  m.ffn_hidden = 12;
  m.seq_len = 5;
  m.init_std = 0.3;
  m.moe.n_routed_experts = 4;
  m.moe.n_shared_experts = 1;
  m.moe.top_k = 2;
  m.moe.expert_hidden = 6;
  m.moe.route_scale = 2.5;
  m.moe.n_groups = 2;
  m.moe.topk_groups = 1;
  m.moe.aux_loss = mt::BalanceLoss::sequence;
  m.moe.aux_alpha = 0.1;
  return m;
}

// tiny_model() with each attention kind: plain MHA, grouped-query MHA, MLA without and with
// query compression.
inline std::vector<std::pair<std::string, mt::ModelConfig>> attention_variants() {
  std::vector<std::pair<std::string, mt::ModelConfig>> out;
  mt::ModelConfig m = tiny_model();
  out.push_back({"mha", m});
  m.n_heads = 4;
  m.head_dim = 2;
  m.attention.n_kv_heads = 2;
  out.push_back({"gqa", m});
  m = tiny_model();
  m.attention.kind = mt::AttentionKind::mla;
  m.attention.kv_lora_rank = 6;
  m.attention.qk_nope_head_dim = 4;
  m.attention.qk_rope_head_dim = 2;
  m.attention.v_head_dim = 3;
  out.push_back({"mla", m});
  m.attention.q_lora_rank = 5;
  out.push_back({"mla_q_lora", m});
  return out;
}

inline std::vector<float> random_floats(size_t n, uint64_t key, double scale = 1.0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(scale * mt::counter_normal(key, i));
  return v;
}

inline std::vector<int> random_tokens(size_t n, int vocab, uint64_t key) {
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int(mt::counter_uniform(key, i) * vocab) % vocab;
  return v;
}

// The message of the UserError that f throws, or "" if it throws none.
inline std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mt::UserError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A fresh empty directory under the system temp dir.
inline std::string temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("moetrain_test_" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace testing
