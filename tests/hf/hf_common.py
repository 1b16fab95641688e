"""What the HF suites share: running moetrain, tiny data and experiments, logits on both sides."""
import os
import subprocess

import h5py
import numpy as np
import torch

VOCAB, SEQ = 64, 16
BOUND = 1e-5  # the largest logit difference, relative to the largest logit

# A tiny MLA model with MoE blocks, as an experiment's [model] table; the fields are what the cases vary.
MLA_TOML = f"""[model]
vocab_size = {VOCAB}
d_model = 32
n_layers = 3
n_dense_layers = {{dense}}
n_heads = 4
ffn_hidden = 48
seq_len = {SEQ}
init_std = 0.2
[model.attention]
kind = "mla"
q_lora_rank = {{q_lora}}
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 4
v_head_dim = 8
[model.moe]
n_routed_experts = 8
n_shared_experts = {{shared}}
top_k = {{top_k}}
expert_hidden = 16
route_scale = {{route_scale}}
n_groups = {{groups}}
topk_groups = {{topk_groups}}
bias_update_speed = 0.05
"""


class Harness:
    def __init__(self, moetrain, work):
        self.moetrain, self.work, self.failures = moetrain, work, 0
        rng = np.random.default_rng(7)
        self.data = os.path.join(work, "data")
        os.makedirs(self.data, exist_ok=True)
        write_shard(os.path.join(self.data, "train_000000.bin"), rng.integers(0, VOCAB, 4096))
        write_shard(os.path.join(self.data, "val_000000.bin"), rng.integers(0, VOCAB, 1024))

    def report(self, name, ok, detail):
        self.failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({detail})", flush=True)

    def attempt(self, *args):
        """moetrain's exit status and its stdout and stderr together."""
        r = subprocess.run([self.moetrain, *args], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def run(self, *args):
        rc, out = self.attempt(*args)
        if rc != 0:
            raise RuntimeError(f"moetrain {' '.join(args)} failed:\n{out[-1500:]}")
        return out

    def experiment(self, path, model_toml, name, extra=""):
        with open(path, "w") as f:
            f.write(model_toml + f"""
[run]
name = "{name}"
out_dir = "{self.work}/runs"
[data]
train = "{self.data}/train_*.bin"
val = "{self.data}/val_*.bin"
[training]
steps = 3
global_batch = 2
micro_batch = 1
eval_every = 0
{extra}
""")

    def moetrain_logits(self, exp, checkpoint, tag):
        out = os.path.join(self.work, f"{tag}.h5")
        self.run("dump-step", exp, "--out", out, "--from", checkpoint, "--set", f"model.seq_len={SEQ}")
        with h5py.File(out, "r") as f:
            return np.array(f["batch/inputs"]), np.array(f["logits"])

    def imported(self, tag, hf_dir):
        """`moetrain import` of a saved transformers model on the harness's shards: the experiment it writes, the
        checkpoint, moetrain's inputs and logits."""
        out = os.path.join(self.work, tag + "-moetrain")
        self.run("import", hf_dir, "--out", out, "--data", self.data)
        exp = os.path.join(out, "experiment.toml")
        checkpoint = os.path.join(out, "ckpt", "step_00000000")
        return (exp, checkpoint) + self.moetrain_logits(exp, checkpoint, tag)

    def exported(self, tag, model_toml):
        """A moetrain run of 3 steps, exported: its directory, and moetrain's inputs and logits of the last
        checkpoint."""
        exp = os.path.join(self.work, tag + ".toml")
        self.experiment(exp, model_toml, tag, "[optimizer]\nlr = 0.01")
        self.run("train", exp)
        hf_dir = os.path.join(self.work, tag + "-hf")
        self.run("export", os.path.join(self.work, "runs", tag), "--hf", hf_dir)
        return (hf_dir,) + self.moetrain_logits(exp, os.path.join(self.work, "runs", tag, "ckpt", "step_00000003"), tag)


def write_shard(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def transformers_logits(model, inputs):
    with torch.no_grad():
        return model(torch.tensor(inputs, dtype=torch.long)).logits.reshape(-1, VOCAB).float().numpy()


def relative_error(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
