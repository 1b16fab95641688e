"""`moetrain import` makes a run directory that trains as is: a random transformers DeepseekV3ForCausalLM
saved here is imported onto the harness's shards; import leaves exactly experiment.toml and the step-0
checkpoint; `moetrain train` of that experiment starts from the imported weights, its first loss
transformers' loss on the same batch; a tokenizer.json other than the shards' is refused.
Usage: hf_import_run.py MOETRAIN WORKDIR. Prints one PASS or FAIL line per case."""
import os
import sys

import h5py
import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import BPE
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

from hf_common import SEQ, VOCAB, Harness

h = Harness(sys.argv[1], sys.argv[2])
work, report = h.work, h.report

torch.manual_seed(11)
config = DeepseekV3Config(
    vocab_size=VOCAB, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=3,
    first_k_dense_replace=1, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4,
    topk_group=2, routed_scaling_factor=2.5, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
    kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=SEQ,
    initializer_range=0.2, num_nextn_predict_layers=0)
model = DeepseekV3ForCausalLM(config).eval()
with torch.no_grad():
    for layer in model.model.layers[1:]:
        layer.mlp.gate.e_score_correction_bias.copy_(0.3 * torch.randn(8))
hf_dir = os.path.join(work, "hf")
model.save_pretrained(hf_dir)

run_dir = os.path.join(work, "imported")
rc, out = h.attempt("import", hf_dir, "--out", run_dir, "--data", h.data)
left = sorted(os.path.relpath(os.path.join(d, f), run_dir) for d, _, files in os.walk(run_dir) for f in files)
want = ["ckpt/step_00000000/manifest.toml", "ckpt/step_00000000/rank_00000.h5", "experiment.toml"]
report("import leaves experiment.toml and the step-0 checkpoint, nothing else", rc == 0 and left == want,
       f"exit {rc}; files {left}")

experiment = os.path.join(run_dir, "experiment.toml")
rc, out = h.attempt("train", experiment, "--set", "training.steps=2")
resumed = f"from {run_dir}/ckpt/step_00000000 (step 0)" in out
losses = []
if rc == 0:
    with h5py.File(os.path.join(run_dir, "log.h5"), "r", libver="latest", swmr=True) as f:
        losses = np.array(f["loss"]).tolist()
report("train runs the imported experiment as is, from the imported checkpoint",
       rc == 0 and resumed and len(losses) == 2,
       f"exit {rc}; resumed from step 0: {resumed}; losses {losses}; {out.strip().splitlines()[-1][:160]}")

# The batch of step 1, as the run reads it, through transformers.
batch = os.path.join(work, "step1.h5")
h.run("dump-step", experiment, "--out", batch, "--from", os.path.join(run_dir, "ckpt", "step_00000000"))
with h5py.File(batch, "r") as f:
    inputs, targets = np.array(f["batch/inputs"]), np.array(f["batch/targets"])
with torch.no_grad():
    logits = model(torch.tensor(inputs, dtype=torch.long)).logits.reshape(-1, VOCAB).float()
    theirs = float(torch.nn.functional.cross_entropy(logits, torch.tensor(targets, dtype=torch.long).reshape(-1)))
err = abs(losses[0] - theirs) / theirs if losses else 1.0
report("the imported run's first loss is transformers' loss on its batch", err < 1e-5,
       f"moetrain {losses[0] if losses else None}, transformers {theirs:.6f}, relative difference {err:.1e}")

rc, out = h.attempt("import", hf_dir, "--out", run_dir, "--data", h.data)
report("import refuses a directory that holds a run already",
       rc == 2 and "imported: already holds experiment.toml" in out,
       f"exit {rc}: {out.strip().splitlines()[-1][:200]}")

rc, out = h.attempt("import", hf_dir, "--out", os.path.join(work, "imported-3"), "--data", work)
report("import refuses a --data directory without shards, naming it",
       rc == 2 and f"--data {work} (its training shards)" in out and "no shard matches" in out
       and not os.path.exists(os.path.join(work, "imported-3")), f"exit {rc}: {out.strip().splitlines()[-1][:200]}")

Tokenizer(BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")])).save(os.path.join(hf_dir, "tokenizer.json"))
rc, out = h.attempt("import", hf_dir, "--out", os.path.join(work, "imported-2"), "--data", h.data)
report("import refuses shards written with another tokenizer than the model's tokenizer.json",
       rc == 2 and "tokenizer.json: not the tokenizer the shards of --data" in out
       and not os.path.exists(os.path.join(work, "imported-2")), f"exit {rc}: {out.strip().splitlines()[-1][:200]}")
sys.exit(1 if h.failures else 0)
