"""moetrain and Hugging Face transformers on the same weights, both ways, on CPU:
  import  a random transformers DeepseekV3ForCausalLM (query compression, group-limited routing,
          shared experts, a non-zero selection bias) -> `moetrain import` -> the logits of
          `moetrain dump-step --from` its checkpoint against transformers' own;
  export  a moetrain run trained a few steps -> `moetrain export --hf` -> transformers loads it
          (from_pretrained) -> its logits against moetrain's; the exported tokenizer.json loads
          in `tokenizers` and gives the byte ids;
each without and with YaRN, read at twice its original context.
Usage: hf_roundtrip.py MOETRAIN WORKDIR. Prints one PASS or FAIL line per case."""
import os
import subprocess
import sys

import h5py
import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM

from hf_common import BOUND, MLA_TOML, SEQ, VOCAB, Harness, relative_error, transformers_logits

h = Harness(sys.argv[1], sys.argv[2])
moetrain, work, report, run = h.moetrain, h.work, h.report, h.run

YARN = {"type": "yarn", "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": SEQ // 2,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def yarn_table(mscale_all_dim):
    return f"""[model.rope_scaling]
kind = "yarn"
factor = 2.0
original_seq_len = {SEQ // 2}
mscale = 1.0
mscale_all_dim = {mscale_all_dim}
"""


imported, exported = h.imported, h.exported


def import_case(yarn):
    tag = "import" + ("-yarn" if yarn else "")
    torch.manual_seed(3)
    config = DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
        first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4,
        topk_group=2, routed_scaling_factor=2.5, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=SEQ,
        initializer_range=0.2, rope_scaling=YARN if yarn else None, num_nextn_predict_layers=0)
    model = DeepseekV3ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
        for layer in model.model.layers[1:]:
            layer.mlp.gate.e_score_correction_bias.copy_(0.3 * torch.randn(8))
    hf_dir = os.path.join(work, tag + "-hf")
    model.save_pretrained(hf_dir)
    exp, checkpoint, inputs, ours = imported(tag, hf_dir)
    err = relative_error(ours, transformers_logits(model, inputs))
    report(f"import: transformers' DeepseekV3 in moetrain{' with YaRN at 2x its context' if yarn else ''}, the same logits",
           err < BOUND, f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")
    if not yarn:
        resume_case(exp, checkpoint, tag)


def resume_case(exp, checkpoint, tag):
    """The imported checkpoint trains on, on one rank and under tp=2 x ep=2 (two ranks): the same losses."""
    sets = ["--set", f"model.seq_len={SEQ}", "--set", f"checkpoint.resume=\"{checkpoint}\"", "--set",
            f"run.out_dir=\"{work}/runs\"", "--set", "training.steps=3", "--set", "training.global_batch=2", "--set",
            "training.micro_batch=1", "--set", "training.eval_every=0"]
    run("train", exp, "--set", f"run.name={tag}-1", *sets)
    launcher = ["mpirun", "--oversubscribe", "-np", "2"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
    r = subprocess.run(launcher + [moetrain, "train", exp, "--set", f"run.name={tag}-2", "--set", "parallel.tp=2",
                                   "--set", "parallel.ep=2", *sets], capture_output=True, text=True)
    resumed = r.returncode == 0 and f"from {checkpoint} (step 0)" in r.stdout
    losses = []
    for name in (f"{tag}-1", f"{tag}-2"):
        with h5py.File(os.path.join(work, "runs", name, "log.h5"), "r", libver="latest", swmr=True) as f:
            losses.append(np.array(f["loss"]))
    rel = float(np.max(np.abs(losses[0] - losses[1]) / np.abs(losses[0]))) if losses[0].shape == losses[1].shape else 1.0
    report("import: the checkpoint trains on under tp=2 x ep=2 as on one rank", resumed and rel < BOUND,
           f"resumed: {resumed}; losses {np.round(losses[0], 5).tolist()}, largest relative difference {rel:.1e}")


def export_case(yarn):
    tag = "export" + ("-yarn" if yarn else "")
    moe = dict(shared=1, top_k=2, route_scale=2.5, groups=4, topk_groups=2)
    model_toml = MLA_TOML.format(dense=1, q_lora=12, **moe) + """\
[model.mtp]
depth = 1
""" + (yarn_table(1.0) if yarn else "")
    hf_dir, inputs, ours = exported(tag, model_toml)
    model = DeepseekV3ForCausalLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    err = relative_error(transformers_logits(model, inputs), ours)
    bias = max(float(layer.mlp.gate.e_score_correction_bias.abs().max()) for layer in model.model.layers[1:])
    report(f"export: a moetrain run in transformers{' with YaRN at 2x its context' if yarn else ''}, the same logits",
           err < BOUND and bias > 0,
           f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}; selection bias up to {bias:.3f}")
    if not yarn:
        ids = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json")).encode("moe, train!").ids
        report("export: tokenizer.json loads in tokenizers and gives the byte ids", ids == list(b"moe, train!"), f"ids {ids}")


def llama_import_case(yarn):
    tag = "llama-import" + ("-yarn" if yarn else "")
    torch.manual_seed(5)
    rope = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": SEQ // 2, "rope_theta": 10000.0}
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=SEQ,
                         initializer_range=0.2, rope_scaling=rope if yarn else None)
    model = LlamaForCausalLM(config).eval()
    hf_dir = os.path.join(work, tag + "-hf")
    model.save_pretrained(hf_dir)
    _, _, inputs, ours = imported(tag, hf_dir)
    err = relative_error(ours, transformers_logits(LlamaForCausalLM.from_pretrained(hf_dir).eval(), inputs))
    report(f"import: transformers' Llama (GQA) in moetrain{' with YaRN at 2x its context' if yarn else ''}, the same logits",
           err < BOUND, f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")


def llama_export_case(yarn):
    tag = "llama-export" + ("-yarn" if yarn else "")
    model_toml = f"""[model]
vocab_size = {VOCAB}
d_model = 32
n_layers = 2
n_dense_layers = 2
n_heads = 4
head_dim = 8
ffn_hidden = 48
seq_len = {SEQ}
init_std = 0.2
[model.attention]
n_kv_heads = 2
""" + (yarn_table(0.5) if yarn else "")
    hf_dir, inputs, ours = exported(tag, model_toml)
    model = LlamaForCausalLM.from_pretrained(hf_dir).eval()
    err = relative_error(transformers_logits(model, inputs), ours)
    report(f"export: a dense GQA moetrain run as transformers' Llama{' with YaRN at 2x its context' if yarn else ''}, "
           "the same logits", err < BOUND, f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")


for case in (import_case, export_case, llama_import_case, llama_export_case):
    for yarn in (False, True):
        try:
            case(yarn)
        except Exception as e:  # a failed step is one failed case; the others still run
            report(f"{case.__name__}{' yarn' if yarn else ''}", False, str(e).splitlines()[0] if str(e) else repr(e))
            print("    " + str(e)[-1200:].replace("\n", "\n    "))
sys.exit(1 if h.failures else 0)
