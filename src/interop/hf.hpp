#pragma once
// Hugging Face interop: a moetrain model as transformers' DeepseekV3ForCausalLM (MLA models) or
// LlamaForCausalLM (dense MHA/GQA models) — config.json, model.safetensors, tokenizer.json — and
// such a model back as a moetrain run (a checkpoint and an experiment that trains it).
//   moetrain                        transformers (DeepSeek-V3's checkpoint names)
//   embedding, head, final_norm     model.embed_tokens, lm_head, model.norm
//   blocks.i.attn_norm / ffn_norm   model.layers.i.input_layernorm / post_attention_layernorm
//   blocks.i.attn.wq_a, q_norm, wq_b (or wq), wkv_a, kv_norm, wkv_b, wo
//                                   self_attn.q_a_proj, q_a_layernorm, q_b_proj (q_proj),
//                                   kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj
//   blocks.i.ffn.w_gate, w_up, w_down            mlp.gate_proj, up_proj, down_proj
//   blocks.i.moe.router, router_bias (buffer)    mlp.gate.weight, mlp.gate.e_score_correction_bias
//   blocks.i.moe.shared.*, experts.*[e]          mlp.shared_experts.*, mlp.experts.e.*
// The layouts agree as they are (RoPE on interleaved pairs: rope_interleave; [c_kv; k_rope] and
// per-head [k_nope; v] in that order), so no tensor is reordered. Llama's names are the same for
// what it has (q_proj, k_proj, v_proj, o_proj and the dense MLP); its RoPE turns feature i with
// i + head_dim/2, so the rows of each head of q_proj and k_proj are reordered, as are the rotary
// rows of a DeepseekV3 saved with rope_interleave false. The MTP modules,
// which transformers does not run, are left out.
#include <string>

namespace mt {

// Writes out_dir/{config.json, model.safetensors, tokenizer.json} from the run's newest checkpoint;
// an MHA model with MoE blocks (no transformers class has them) is refused.
void export_hf(const std::string& run_dir, const std::string& out_dir);
// Reads hf_dir/config.json (model_type deepseek_v3 or llama) and its safetensors (one file, or several by
// model.safetensors.index.json); makes out_dir a run directory holding the checkpoint ckpt/step_00000000 (AdamW moments
// zero, trained with `seed`) and experiment.toml, which trains it on the shards of `data_dir` as is
// (import_experiment.hpp). Nothing else is written. Returns the checkpoint's directory.
std::string import_hf(const std::string& hf_dir, const std::string& out_dir, const std::string& data_dir,
                      long long seed);

}  // namespace mt
