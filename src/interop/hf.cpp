#include "interop/hf.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "infer/checkpoint_model.hpp"
#include "infer/sample.hpp"
#include "interop/hf_config.hpp"
#include "interop/import_experiment.hpp"
#include "io/bpe.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "model/flops.hpp"
#include "model/rope_scaling.hpp"
#include "parallel/layout.hpp"
#include "runtime/one_rank.hpp"
#include "util/read_file.hpp"

namespace mt {

namespace fs = std::filesystem;

namespace {

// Rows of a projection that RoPE turns: in each block of `block` rows, the `width` rows from
// `first`. Llama (and DeepseekV3 with rope_interleave false) turns feature i with i + width/2;
// moetrain turns 2i with 2i + 1.
struct RopeRows {
  int block = 0, first = 0, width = 0;
};

// One transformers tensor and the moetrain parameter (or model buffer) it is, or for a routed
// expert the slice `expert` of one along its first dimension.
struct HfName {
  std::string ours, hf;
  int expert = -1;
  bool buffer = false;
  RopeRows rope = {};  // rows reordered between the libraries' RoPE pairings (to_halves)
};

// Reordering the rope rows of the query and key projections alike (2i -> i, 2i+1 -> width/2 + i)
// turns one pairing into the other: the products q.k are sums over the same pairs.
// `back`: transformers' order to moetrain's.
std::vector<float> to_halves(const std::vector<float>& w, size_t rows, size_t cols, const RopeRows& r, bool back) {
  std::vector<float> out(w);
  const size_t block = size_t(r.block), half = size_t(r.width) / 2;
  for (size_t row = 0; row < rows; ++row) {
    const size_t at = row % block;
    if (at < size_t(r.first) || at >= size_t(r.first + r.width)) continue;
    const size_t f = at - size_t(r.first);
    const size_t theirs = row - f + (f % 2 ? half + f / 2 : f / 2);
    const size_t from = back ? theirs : row, to = back ? row : theirs;
    std::copy_n(w.begin() + long(from * cols), cols, out.begin() + long(to * cols));
  }
  return out;
}

std::vector<HfName> llama_names(const ModelConfig& m) {
  std::vector<HfName> out{{"embedding", "model.embed_tokens.weight"}, {"final_norm", "model.norm.weight"},
                          {"head", "lm_head.weight"}};
  for (int i = 0; i < m.n_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i), h = "model.layers." + std::to_string(i);
    auto add = [&](const std::string& ours, const std::string& hf, RopeRows rope = {}) {
      out.push_back({b + ours, h + hf, -1, false, rope});
    };
    const RopeRows heads{m.head_dim, 0, m.head_dim};
    add(".attn_norm", ".input_layernorm.weight");
    add(".ffn_norm", ".post_attention_layernorm.weight");
    add(".attn.wq", ".self_attn.q_proj.weight", heads);
    add(".attn.wk", ".self_attn.k_proj.weight", heads);
    add(".attn.wv", ".self_attn.v_proj.weight");
    add(".attn.wo", ".self_attn.o_proj.weight");
    add(".ffn.w_gate", ".mlp.gate_proj.weight");
    add(".ffn.w_up", ".mlp.up_proj.weight");
    add(".ffn.w_down", ".mlp.down_proj.weight");
  }
  return out;
}

// `halves`: the checkpoint pairs RoPE features as Llama does (rope_interleave false).
std::vector<HfName> deepseek_names(const ModelConfig& m, bool halves) {
  const auto& a = m.attention;
  const int rope = a.qk_rope_head_dim;
  const RopeRows q_rope = halves ? RopeRows{a.qk_nope_head_dim + rope, a.qk_nope_head_dim, rope} : RopeRows{};
  const RopeRows k_rope =
      halves ? RopeRows{a.kv_lora_rank + rope, a.kv_lora_rank, rope} : RopeRows{};
  std::vector<HfName> out{{"embedding", "model.embed_tokens.weight"}, {"final_norm", "model.norm.weight"},
                          {"head", "lm_head.weight"}};
  for (int i = 0; i < m.n_layers; ++i) {
    const std::string b = "blocks." + std::to_string(i), h = "model.layers." + std::to_string(i);
    auto add = [&](const std::string& ours, const std::string& hf, RopeRows rope = {}) {
      out.push_back({b + ours, h + hf, -1, false, rope});
    };
    add(".attn_norm", ".input_layernorm.weight");
    add(".ffn_norm", ".post_attention_layernorm.weight");
    if (m.attention.q_lora_rank > 0) {
      add(".attn.wq_a", ".self_attn.q_a_proj.weight");
      add(".attn.q_norm", ".self_attn.q_a_layernorm.weight");
      add(".attn.wq_b", ".self_attn.q_b_proj.weight", q_rope);
    } else {
      add(".attn.wq", ".self_attn.q_proj.weight", q_rope);
    }
    add(".attn.wkv_a", ".self_attn.kv_a_proj_with_mqa.weight", k_rope);
    add(".attn.kv_norm", ".self_attn.kv_a_layernorm.weight");
    add(".attn.wkv_b", ".self_attn.kv_b_proj.weight");
    add(".attn.wo", ".self_attn.o_proj.weight");
    const char* projections[][2] = {{"w_gate", "gate_proj"}, {"w_up", "up_proj"}, {"w_down", "down_proj"}};
    if (i < m.n_dense_layers) {
      for (auto& p : projections) add(std::string(".ffn.") + p[0], std::string(".mlp.") + p[1] + ".weight");
      continue;
    }
    add(".moe.router", ".mlp.gate.weight");
    out.push_back({b + ".moe.router_bias", h + ".mlp.gate.e_score_correction_bias", -1, true});
    if (m.moe.n_shared_experts > 0)
      for (auto& p : projections)
        add(std::string(".moe.shared.") + p[0], std::string(".mlp.shared_experts.") + p[1] + ".weight");
    for (int e = 0; e < m.moe.n_routed_experts; ++e)
      for (auto& p : projections)
        out.push_back(
            {b + ".moe.experts." + p[0], h + ".mlp.experts." + std::to_string(e) + "." + p[1] + ".weight", e});
  }
  return out;
}

// What transformers' DeepseekV3 cannot hold.
void check_exportable(const ModelConfig& m, const std::string& where) {
  if (m.attention.kind != AttentionKind::mla && m.n_layers > m.n_dense_layers)
    throw UserError(where + ": model.attention.kind = \"" + name_of(m.attention.kind) +
                    "\" with MoE blocks (model.n_dense_layers = " + std::to_string(m.n_dense_layers) + " of " +
                    std::to_string(m.n_layers) +
                    "): transformers' DeepseekV3 runs MLA, LlamaForCausalLM has no MoE, and no transformers class "
                    "pairs multi-head attention with DeepSeek-V3's sigmoid routing; "
                    "export MLA models, or dense MHA ones");
  if (m.n_layers > m.n_dense_layers && m.moe.n_shared_experts == 0)
    throw UserError(where + ": model.moe.n_shared_experts = 0: transformers' DeepseekV3 always has shared experts");
  if (m.attention.kind == AttentionKind::mla && m.norm_eps != 1e-6)
    throw UserError(where + ": model.norm_eps = " + json_float(m.norm_eps) +
                    ": transformers' DeepseekV3 keeps 1e-6 in its latent norms (q_a_layernorm, kv_a_layernorm) "
                    "whatever rms_norm_eps says; export MLA models with norm_eps = 1e-6");
}

std::string number(double v) { return json_float(v); }

// YaRN as transformers' rope_scaling, its factor on cos and sin (attention_factor) written out so
// that neither library's defaults decide it. DeepSeek-V3's attention also multiplies its softmax
// scale by m(mscale_all_dim)^2, as moetrain's does; Llama's does not, so there all of moetrain's
// m(mscale)^2 on q.k goes into cos and sin.
std::string rope_scaling_json(const ModelConfig& m, bool deepseek) {
  const RopeScalingConfig& r = m.rope_scaling;
  if (r.kind != RopeScalingKind::yarn) return "null";
  const double m_all = yarn_magnitude(r, r.mscale_all_dim),
               factor = yarn_magnitude(r, r.mscale) / (deepseek ? m_all : 1.0);
  std::ostringstream o;
  o << "{\"type\": \"yarn\", \"rope_type\": \"yarn\", \"factor\": " << number(r.factor)
    << ", \"original_max_position_embeddings\": " << r.original_seq_len << ", \"beta_fast\": " << number(r.beta_fast)
    << ", \"beta_slow\": " << number(r.beta_slow) << ", \"attention_factor\": " << number(factor);
  if (deepseek) o << ", \"mscale\": " << number(r.mscale) << ", \"mscale_all_dim\": " << number(r.mscale_all_dim);
  o << "}";
  return o.str();
}

// moetrain's document start begins and ends a document, where the vocabulary has it.
std::string document_start(const ModelConfig& m) {
  return m.vocab_size > Bpe::kDocumentStart ? std::to_string(Bpe::kDocumentStart) : "null";
}

std::string llama_config_json(const ModelConfig& m) {
  std::ostringstream o;
  o << "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
    << "  \"vocab_size\": " << m.vocab_size << ",\n  \"hidden_size\": " << m.d_model << ",\n"
    << "  \"intermediate_size\": " << m.ffn_hidden << ",\n  \"num_hidden_layers\": " << m.n_layers << ",\n"
    << "  \"num_attention_heads\": " << m.n_heads << ",\n  \"num_key_value_heads\": "
    << (m.attention.n_kv_heads ? m.attention.n_kv_heads : m.n_heads) << ",\n  \"head_dim\": " << m.head_dim << ",\n"
    << "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": " << number(m.norm_eps) << ",\n"
    << "  \"max_position_embeddings\": " << m.seq_len << ",\n  \"rope_theta\": " << number(m.rope_theta) << ",\n"
    << "  \"rope_scaling\": " << rope_scaling_json(m, false) << ",\n  \"attention_bias\": false,\n"
    << "  \"mlp_bias\": false,\n  \"tie_word_embeddings\": false,\n"
    << "  \"bos_token_id\": " << document_start(m) << ",\n  \"eos_token_id\": " << document_start(m) << ",\n"
    << "  \"initializer_range\": " << number(m.init_std) << ",\n  \"torch_dtype\": \"float32\"\n}\n";
  return o.str();
}

std::string deepseek_config_json(const ModelConfig& m) {
  const auto& a = m.attention;
  const auto& e = m.moe;
  std::ostringstream o;
  o << "{\n  \"architectures\": [\"DeepseekV3ForCausalLM\"],\n  \"model_type\": \"deepseek_v3\",\n"
    << "  \"vocab_size\": " << m.vocab_size << ",\n  \"hidden_size\": " << m.d_model << ",\n"
    << "  \"intermediate_size\": " << m.ffn_hidden << ",\n  \"moe_intermediate_size\": " << e.expert_hidden << ",\n"
    << "  \"num_hidden_layers\": " << m.n_layers << ",\n  \"first_k_dense_replace\": " << m.n_dense_layers << ",\n"
    << "  \"moe_layer_freq\": 1,\n  \"n_routed_experts\": " << e.n_routed_experts << ",\n"
    << "  \"n_shared_experts\": " << e.n_shared_experts << ",\n  \"num_experts_per_tok\": " << e.top_k << ",\n"
    << "  \"n_group\": " << e.n_groups << ",\n  \"topk_group\": " << e.topk_groups << ",\n"
    << "  \"routed_scaling_factor\": " << number(e.route_scale) << ",\n  \"norm_topk_prob\": true,\n"
    << "  \"scoring_func\": \"sigmoid\",\n  \"topk_method\": \"noaux_tc\",\n"
    << "  \"num_attention_heads\": " << m.n_heads << ",\n  \"num_key_value_heads\": " << m.n_heads << ",\n"
    << "  \"q_lora_rank\": " << (a.q_lora_rank > 0 ? std::to_string(a.q_lora_rank) : "null") << ",\n"
    << "  \"kv_lora_rank\": " << a.kv_lora_rank << ",\n  \"qk_nope_head_dim\": " << a.qk_nope_head_dim << ",\n"
    << "  \"qk_rope_head_dim\": " << a.qk_rope_head_dim << ",\n  \"v_head_dim\": " << a.v_head_dim << ",\n"
    << "  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": " << number(m.norm_eps) << ",\n"
    << "  \"max_position_embeddings\": " << m.seq_len << ",\n  \"rope_theta\": " << number(m.rope_theta) << ",\n"
    << "  \"rope_scaling\": " << rope_scaling_json(m, true);
  o << ",\n  \"rope_interleave\": true,\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
    << "  \"tie_word_embeddings\": false,\n  \"num_nextn_predict_layers\": 0,\n"
    << "  \"bos_token_id\": " << document_start(m) << ",\n  \"eos_token_id\": " << document_start(m) << ",\n"
    << "  \"initializer_range\": " << number(m.init_std) << ",\n  \"torch_dtype\": \"float32\"\n}\n";
  return o.str();
}

// Every tensor of a transformers model directory: model.safetensors, or the shards its index
// names, each tensor found in the shard the index gives.
std::map<std::string, Tensor> read_weights(const std::string& dir) {
  const fs::path one = fs::path(dir) / "model.safetensors", index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(one)) return read_safetensors(one.string());
  if (!fs::exists(index))
    throw UserError(dir + ": neither model.safetensors nor model.safetensors.index.json is there");
  const std::string where = index.string();
  const Json doc = parse_json(read_file(where), where);
  const Json& map = doc.at("weight_map", where);
  if (map.kind != Json::Kind::object) throw UserError(where + ": weight_map: expected a table of tensor -> file");
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [name, file] : map.object) {
    if (file.kind != Json::Kind::string || file.string.empty() || file.string.find('/') != std::string::npos)
      throw UserError(where + ": weight_map: " + name + ": expected a file name beside the index");
    by_file[file.string].insert(name);
  }
  std::map<std::string, Tensor> all;
  for (const auto& [file, names] : by_file) {
    const fs::path shard = fs::path(dir) / file;
    if (!fs::exists(shard))
      throw UserError(where + ": weight_map puts " + *names.begin() + " (and " + std::to_string(names.size() - 1) +
                      " more) in " + file + ", which is not in " + dir);
    std::map<std::string, Tensor> tensors = read_safetensors(shard.string());
    for (const std::string& name : names)
      if (!tensors.count(name))
        throw UserError(shard.string() + ": no tensor " + name + ", which " + where + " puts there");
    all.merge(tensors);
  }
  return all;
}

// The shape of one transformers tensor, and where its values start in the moetrain parameter.
std::vector<int64_t> slice_shape(const ParamInfo& info, int expert, size_t* first) {
  if (expert < 0) {
    *first = 0;
    return info.shape;
  }
  const std::vector<int64_t> shape(info.shape.begin() + 1, info.shape.end());
  *first = size_t(expert) * info.numel / size_t(info.shape[0]);
  return shape;
}

}  // namespace

void export_hf(const std::string& run_dir, const std::string& out_dir) {
  const std::string step_dir = newest_checkpoint(run_dir);
  const Config cfg = checkpoint_config(step_dir);
  const ModelConfig& m = cfg.model;
  check_exportable(m, step_dir);
  Model model(m, uint64_t(cfg.run.seed), cpu_backend(), {}, 1);
  const TrainState state = load_model(model, step_dir);
  const ParamStore& p = model.params;
  const std::vector<float> values = p.host_values();
  const auto ids = p.ids_by_name(), buffers = p.buffer_ids_by_name();
  std::map<std::string, Tensor> tensors;
  const bool deepseek = m.attention.kind == AttentionKind::mla;
  for (const HfName& n : deepseek ? deepseek_names(m, false) : llama_names(m)) {
    Tensor& t = tensors[n.hf];
    if (n.buffer) {
      t.values = p.host_buffer(buffers.at(n.ours));
      t.shape = {int64_t(t.values.size())};
      continue;
    }
    const ParamInfo& info = p.info(ids.at(n.ours));
    size_t first = 0;
    t.shape = slice_shape(info, n.expert, &first);
    size_t count = 1;
    for (int64_t d : t.shape) count *= size_t(d);
    const auto from = values.begin() + long(info.offset + first);
    t.values.assign(from, from + long(count));
    if (n.rope.width) t.values = to_halves(t.values, size_t(t.shape[0]), size_t(t.shape[1]), n.rope, false);
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw UserError(out_dir + ": cannot create the directory: " + ec.message());
  write_safetensors(out_dir + "/model.safetensors", tensors);
  const std::string tokenizer = run_tokenizer(run_dir, cfg.data.train);
  const Bpe bpe = tokenizer.empty() ? Bpe::byte_level() : Bpe::load(tokenizer);
  for (const auto& [name, text] : {std::pair{"config.json", deepseek ? deepseek_config_json(m) : llama_config_json(m)},
                                   std::pair{"tokenizer.json", bpe.hf_json()}}) {
    std::ofstream f(out_dir + "/" + name);
    f << text;
    if (!f.flush()) throw UserError(out_dir + "/" + name + ": cannot write (is the disk full?)");
  }
  std::printf("export: %s (step %lld) -> %s: config.json (%s), model.safetensors (%zu tensors), tokenizer.json (%s)\n",
              step_dir.c_str(), state.step, out_dir.c_str(), deepseek ? "DeepseekV3ForCausalLM" : "LlamaForCausalLM",
              tensors.size(),
              tokenizer.empty() ? "bytes" : ("BPE of " + std::to_string(bpe.vocab()) + " tokens").c_str());
  if (m.mtp.depth > 0)
    std::printf("export: the %d MTP module(s) are left out: transformers' classes do not run them\n", m.mtp.depth);
}

std::string import_hf(const std::string& hf_dir, const std::string& out_dir, const std::string& data_dir,
                      long long seed) {
  for (const char* held : {"experiment.toml", "ckpt"})
    if (fs::exists(fs::path(out_dir) / held))
      throw UserError(out_dir + ": already holds " + held + "; import into a new directory (it becomes the run's)");
  const std::string config_path = hf_dir + "/config.json";
  const Json hf = parse_json(read_file(config_path), config_path);
  const HfModel hf_model = hf_model_of(hf, config_path);
  const std::string& table = hf_model.toml;
  const Config cfg =
      parse_config(table + "[run]\nseed = " + std::to_string(seed) + "\n", config_path + " (as moetrain's [model])");
  const ModelConfig& m = cfg.model;
  std::map<std::string, Tensor> tensors = read_weights(hf_dir);
  // Every parameter comes from the files, so a config.json larger than them is refused before the
  // model is allocated (a vocab_size of 2e9 asked for 128 GB).
  double held = 0;
  for (const auto& [name, t] : tensors) held += double(t.values.size());
  if (total_params(m) > held)
    throw UserError(config_path + ": describes a model of " + std::to_string((long long)total_params(m)) +
                    " parameters; its safetensors hold " + std::to_string((long long)held) + " values");
  Model model(m, uint64_t(seed), cpu_backend(), {}, 1);
  ParamStore& p = model.params;
  std::vector<float> values = p.host_values();
  const auto ids = p.ids_by_name(), buffers = p.buffer_ids_by_name();
  for (const HfName& n : hf_model.deepseek ? deepseek_names(m, hf_model.rope_halves) : llama_names(m)) {
    auto it = tensors.find(n.hf);
    if (it == tensors.end()) throw UserError(hf_dir + ": no tensor " + n.hf + " in its safetensors");
    const Tensor& t = it->second;
    auto shape_text = [](const std::vector<int64_t>& s) {
      std::string out;
      for (int64_t d : s) out += (out.empty() ? "[" : ", ") + std::to_string(d);
      return out + "]";
    };
    if (n.buffer) {
      if (t.values.size() != p.buffer_size(buffers.at(n.ours)))
        throw UserError(hf_dir + ": " + n.hf + " has " + std::to_string(t.values.size()) + " values, the model's " +
                        std::to_string(p.buffer_size(buffers.at(n.ours))));
      p.set_buffer(buffers.at(n.ours), t.values);
    } else {
      const ParamInfo& info = p.info(ids.at(n.ours));
      size_t first = 0;
      const std::vector<int64_t> want = slice_shape(info, n.expert, &first);
      if (t.shape != want)
        throw UserError(hf_dir + ": " + n.hf + " has shape " + shape_text(t.shape) + ", config.json makes it " +
                        shape_text(want));
      const std::vector<float> ours =
          n.rope.width ? to_halves(t.values, size_t(want[0]), size_t(want[1]), n.rope, true) : t.values;
      std::copy(ours.begin(), ours.end(), values.begin() + long(info.offset + first));
    }
    tensors.erase(it);
  }
  p.set_values(values);
  const std::string data_note = check_import_data(hf_dir, data_dir, m.vocab_size);
  const std::string experiment = out_dir + "/experiment.toml";
  const std::string text = import_experiment_toml(hf_dir, out_dir, data_dir, table, seed);
  // What the experiment says must read back as this model, or its run would refuse the checkpoint.
  const Config written = parse_config(text, experiment);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw UserError(out_dir + ": cannot create the directory: " + ec.message());
  const OneRank one(cpu_backend());
  std::vector<float> zeros(values.size(), 0.0f), zeros_sq(values.size(), 0.0f);
  save_checkpoint(out_dir, {p, values, zeros, zeros_sq}, TrainState{0, 0, seed},
                  {written.resolved_toml, layout_text(layout_of_config(written)), 1}, one.groups);
  {
    std::ofstream f(experiment);
    f << text;
    if (!f.flush()) throw UserError(experiment + ": cannot write (is the disk full?)");
  }
  const std::string step_dir = checkpoint_dir(out_dir, 0);
  std::printf("import: %s -> %s (%zu parameters) and %s\n", hf_dir.c_str(), step_dir.c_str(),
              p.total() + p.buffers_total(), experiment.c_str());
  std::printf("import: %s\n", data_note.c_str());
  if (!tensors.empty())
    std::printf("import: %zu tensors not used (e.g. %s): transformers' MTP layers and others moetrain's model lacks\n",
                tensors.size(), tensors.begin()->first.c_str());
  std::printf("import: train it with: moetrain train %s\n", experiment.c_str());
  return step_dir;
}

}  // namespace mt
