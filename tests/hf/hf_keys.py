"""Every computation-changing key of transformers' DeepseekV3Config and LlamaConfig at a value other
than the default, each in a tiny random model saved by transformers: `moetrain import` either runs
it (moetrain's logits within BOUND of transformers') or refuses it naming the key (exit status 2).
Then sharded bf16 saves, a missing shard and a missing required key; and `moetrain export` of every
model kind the trainer can express, reloaded by transformers with no missing or unexpected weight
and the same logits (docs/hf_config_keys.md lists the keys).
Usage: hf_keys.py MOETRAIN WORKDIR. Prints one PASS or FAIL line per case."""
import glob
import json
import os
import sys

import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM

from hf_common import BOUND, MLA_TOML, SEQ, VOCAB, Harness, relative_error, transformers_logits

h = Harness(sys.argv[1], sys.argv[2])
work = h.work

DEEPSEEK = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
                first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4,
                topk_group=2, routed_scaling_factor=2.5, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
                kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=SEQ,
                initializer_range=0.2, num_nextn_predict_layers=0)
LLAMA = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ, initializer_range=0.2)
YARN = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": SEQ // 2, "rope_theta": 10000.0}


def saved(tag, llama, keys, patch=None, drop_rope=(), drop=()):
    """A random transformers model with `keys` over the base config, saved; `patch` then edits config.json (keys
    the class does not take), `drop_rope` removes entries transformers filled into its RoPE table and `drop`
    keys it wrote with their defaults."""
    torch.manual_seed(11)
    base = {k: v for k, v in (LLAMA if llama else DEEPSEEK).items() if k not in drop}
    if llama:
        model = LlamaForCausalLM(LlamaConfig(**{**base, **keys})).eval()
    else:
        model = DeepseekV3ForCausalLM(DeepseekV3Config(**{**base, **keys})).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.copy_(1 + 0.2 * torch.randn_like(p))
            for layer in model.model.layers:
                if hasattr(layer.mlp, "gate"):
                    bias = layer.mlp.gate.e_score_correction_bias
                    bias.copy_(0.3 * torch.randn_like(bias))
    hf_dir = os.path.join(work, tag + "-hf")
    model.save_pretrained(hf_dir)
    path = os.path.join(hf_dir, "config.json")
    config = json.load(open(path))
    for table in ("rope_parameters", "rope_scaling"):
        for key in drop_rope:
            if isinstance(config.get(table), dict):
                config[table].pop(key, None)
    config.update(patch or {})
    for key in drop:
        del config[key]
    json.dump(config, open(path, "w"), indent=2)
    return model, hf_dir


def honoured(tag, what, llama=False, drop_rope=(), drop=(), **keys):
    model, hf_dir = saved(tag, llama, keys, drop_rope=drop_rope, drop=drop)
    _, _, inputs, ours = h.imported(tag, hf_dir)
    err = relative_error(ours, transformers_logits(model, inputs))
    h.report(f"import honours {what}", err < BOUND,
             f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")


def refused(tag, what, named, llama=False, patch=None, **keys):
    _, hf_dir = saved(tag, llama, keys, patch)
    rc, out = h.attempt("import", hf_dir, "--out", os.path.join(work, tag + "-moetrain"), "--data", h.data)
    h.report(f"import refuses {what}", rc == 2 and named in out, f"exit {rc}: {out.strip().splitlines()[-1][:200]}")


def sharded_cases():
    model, _ = saved("sharded", False, {})
    hf_dir = os.path.join(work, "sharded-bf16-hf")
    model.to(torch.bfloat16).save_pretrained(hf_dir, max_shard_size="40KB")
    shards = sorted(glob.glob(os.path.join(hf_dir, "model-*.safetensors")))
    _, _, inputs, ours = h.imported("sharded", hf_dir)
    theirs = transformers_logits(DeepseekV3ForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval(), inputs)
    err = relative_error(ours, theirs)
    alone = os.path.exists(os.path.join(hf_dir, "model.safetensors"))
    h.report("import: a sharded bf16 save, every shard read", len(shards) >= 3 and not alone and err < BOUND,
             f"{len(shards)} shards; largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")
    gone = os.path.basename(shards[1])
    os.remove(shards[1])
    rc, out = h.attempt("import", hf_dir, "--out", os.path.join(work, "sharded-missing"), "--data", h.data)
    h.report("import: a missing shard is named", rc == 2 and f"in {gone}, which is not in" in out,
             f"exit {rc}: {out.strip().splitlines()[-1][:200]}")


def missing_key_case(tag, llama, key):
    _, hf_dir = saved(tag, llama, {})
    path = os.path.join(hf_dir, "config.json")
    config = json.load(open(path))
    del config[key]
    json.dump(config, open(path, "w"))
    rc, out = h.attempt("import", hf_dir, "--out", os.path.join(work, tag + "-moetrain"), "--data", h.data)
    h.report(f"import: config.json without the required {key} is refused naming it",
             rc == 2 and f'no "{key}"' in out, f"exit {rc}: {out.strip().splitlines()[-1][:200]}")


# Route scale 1.0: a whole-number float that export once wrote as an integer.
MLA = MLA_TOML.replace("{shared}", "2").replace("{top_k}", "3").replace("{route_scale}", "1.0") \
    .replace("{groups}", "2").replace("{topk_groups}", "1")
MHA = f"""[model]
vocab_size = {VOCAB}
d_model = 32
n_layers = 2
n_dense_layers = 2
n_heads = 4
head_dim = {{head_dim}}
ffn_hidden = 48
seq_len = {SEQ}
init_std = 0.2
norm_eps = 1e-5
[model.attention]
n_kv_heads = {{kv}}
"""
YARN_TOML = f"""[model.rope_scaling]
kind = "yarn"
factor = 2.0
original_seq_len = {SEQ // 2}
beta_fast = 16.0
beta_slow = 2.0
mscale = 1.0
mscale_all_dim = {{all_dim}}
"""


def export_case(tag, what, model_toml, llama):
    hf_dir, inputs, ours = h.exported(tag, model_toml)
    cls = LlamaForCausalLM if llama else DeepseekV3ForCausalLM
    model, info = cls.from_pretrained(hf_dir, output_loading_info=True)
    left = {k: v for k, v in info.items() if v}
    err = relative_error(transformers_logits(model.eval(), inputs), ours)
    h.report(f"export: {what} reloads in transformers, every weight used, the same logits", not left and err < BOUND,
             f"loading info {left or 'clean'}; largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")
    return hf_dir


def export_cases():
    hf_dir = export_case("export-moe", "MLA+MoE with route_scale 1.0", MLA.format(dense=1, q_lora=12), False)
    text = open(os.path.join(hf_dir, "config.json")).read()
    h.report("export: floats are written as floats", '"routed_scaling_factor": 1.0' in text and
             '"rms_norm_eps": 1e-06' in text, "routed_scaling_factor and rms_norm_eps in config.json")
    export_case("export-yarn", "MLA+MoE with YaRN (beta_fast 16, beta_slow 2)",
                MLA.format(dense=1, q_lora=12) + YARN_TOML.format(all_dim=0.7), False)
    export_case("export-dense", "dense MLA without query compression", MLA.format(dense=3, q_lora=0), False)
    export_case("export-mha", "dense MHA as Llama (head_dim 16, norm_eps 1e-5)",
                MHA.format(head_dim=16, kv=0), True)
    export_case("export-gqa-yarn", "dense GQA as Llama with YaRN", MHA.format(head_dim=8, kv=1) +
                YARN_TOML.format(all_dim=0.0), True)
    exp = os.path.join(work, "export-eps.toml")
    h.experiment(exp, MLA.format(dense=1, q_lora=12), "export-eps")
    h.run("train", exp, "--set", "model.norm_eps=1e-5")
    rc, out = h.attempt("export", os.path.join(work, "runs", "export-eps"), "--hf", os.path.join(work, "export-eps-hf"))
    h.report("export: an MLA model with norm_eps 1e-5 is refused naming it (transformers' latent norms keep 1e-6)",
             rc == 2 and "model.norm_eps = 1e-05" in out, f"exit {rc}: {out.strip().splitlines()[-1][:200]}")


CASES = [
    lambda: honoured("interleave", "rope_interleave = false (half-split RoPE)", rope_interleave=False),
    lambda: honoured("no-q-lora", "q_lora_rank = null", q_lora_rank=None),
    lambda: honoured("all-moe", "first_k_dense_replace = 0", first_k_dense_replace=0),
    lambda: honoured("all-dense", "first_k_dense_replace = 3 of 3 (no MoE block)", first_k_dense_replace=3),
    lambda: honoured("routing", "n_shared_experts 2, routed_scaling_factor 1.0, n_group 2, topk_group 1, top-3",
                     n_shared_experts=2, routed_scaling_factor=1.0, n_group=2, topk_group=1, num_experts_per_tok=3),
    lambda: honoured("theta", "rope_theta = 500", rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
    lambda: honoured("swish", "hidden_act = swish", hidden_act="swish"),
    lambda: honoured("yarn-no-original", "YaRN without original_max_position_embeddings (max_position_embeddings)",
                     rope_parameters={"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0, "mscale": 1.0,
                                      "mscale_all_dim": 1.0},
                     drop_rope=("original_max_position_embeddings",)),
    lambda: honoured("yarn-tuned", "YaRN with attention_factor 1.3, beta_fast 16, beta_slow 2, mscale_all_dim 0.7",
                     rope_parameters={**YARN, "attention_factor": 1.3, "beta_fast": 16.0, "beta_slow": 2.0,
                                      "mscale": 1.0, "mscale_all_dim": 0.7}),
    lambda: honoured("defaults", "absent optional keys as DeepseekV3Config's defaults (3 dense blocks, "
                     "1 shared expert, "
                     "routed_scaling_factor 2.5, 8 groups, 4 chosen)", num_hidden_layers=4, n_routed_experts=16,
                     drop=("first_k_dense_replace", "n_shared_experts", "routed_scaling_factor", "n_group",
                           "topk_group", "rope_interleave", "rms_norm_eps", "hidden_act")),
    lambda: honoured("llama-shapes", "Llama rms_norm_eps 1e-5, head_dim 16, one key-value head, rope_theta 500",
                     llama=True, rms_norm_eps=1e-5, head_dim=16, num_key_value_heads=1,
                     rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
    lambda: honoured("llama-yarn-no-original", "Llama YaRN without original_max_position_embeddings", llama=True,
                     rope_parameters={"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0},
                     drop_rope=("original_max_position_embeddings",)),
    lambda: honoured("llama-partial-plain", "Llama plain RoPE with partial_rotary_factor 0.5 (ignored there)",
                     llama=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                  "partial_rotary_factor": 0.5}),
    lambda: refused("eps", "DeepseekV3 rms_norm_eps 1e-5", "rms_norm_eps = 1e-05", rms_norm_eps=1e-5),
    lambda: refused("gelu", "hidden_act gelu", 'hidden_act = "gelu"', hidden_act="gelu"),
    lambda: refused("truncate", "YaRN truncate = false", "truncate = false",
                    rope_parameters={**YARN, "truncate": False}),
    lambda: refused("linear", "rope_type linear", 'rope_type = "linear"',
                    rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
    lambda: refused("bias", "attention_bias = true", "attention_bias = true", attention_bias=True),
    lambda: refused("tied", "tie_word_embeddings = true", "tie_word_embeddings = true", tie_word_embeddings=True),
    lambda: refused("dropout", "attention_dropout 0.1", "attention_dropout = 0.1", attention_dropout=0.1),
    lambda: refused("kv-heads", "DeepseekV3 num_key_value_heads 2 of 4", "num_key_value_heads = 2",
                    num_key_value_heads=2),
    lambda: refused("norm-topk", "norm_topk_prob = false", "norm_topk_prob = false", norm_topk_prob=False),
    lambda: refused("softmax", "scoring_func softmax", 'scoring_func = "softmax"', patch={"scoring_func": "softmax"}),
    lambda: refused("greedy", "topk_method greedy", 'topk_method = "greedy"', patch={"topk_method": "greedy"}),
    lambda: refused("freq", "moe_layer_freq 2", "moe_layer_freq = 2", patch={"moe_layer_freq": 2}),
    lambda: refused("llama-mlp-bias", "Llama mlp_bias = true", "mlp_bias = true", llama=True, mlp_bias=True),
    lambda: refused("llama-partial", "Llama YaRN partial_rotary_factor 0.5", "partial_rotary_factor = 0.5", llama=True,
                    rope_parameters={**YARN, "partial_rotary_factor": 0.5}),
    sharded_cases,
    lambda: missing_key_case("no-kv-lora", False, "kv_lora_rank"),
    lambda: missing_key_case("no-hidden", True, "hidden_size"),
    export_cases,
]

for i, case in enumerate(CASES):
    try:
        case()
    except Exception as e:  # a failed step is one failed case; the others still run
        h.report(f"case {i}", False, str(e).splitlines()[0] if str(e) else repr(e))
        print("    " + str(e)[-1200:].replace("\n", "\n    "))
sys.exit(1 if h.failures else 0)
