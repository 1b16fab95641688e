"""Training throughput of the PyTorch reference model (tests/oracle/reference_model.py), eager mode.

    python bench/torch_train.py STEP.h5 STEPS THREADS [cpu|cuda] [fp32|bf16]

Takes the weights, config and first global batch from a `moetrain dump-step` file and trains
on that batch for STEPS steps (forward, backward, clipping, torch.optim.AdamW, the
balancing-bias update) with THREADS threads, on the CPU (default) or the GPU, in float32
(default) or with the forward under bf16 autocast. Prints the median tokens/s after 3 warm-up steps.
"""
import statistics
import sys
import time
import tomllib
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "oracle"))
from reference_model import Reference, learning_rate  # noqa: E402


def main():
    path, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    precision = sys.argv[5] if len(sys.argv) > 5 else "fp32"
    if device not in ("cpu", "cuda") or precision not in ("fp32", "bf16"):
        sys.exit(f"torch_train.py: device must be cpu or cuda (got {device}), precision fp32 or bf16 (got {precision})")
    torch.set_num_threads(threads)
    torch.set_default_device(device)  # the reference model's own tensors (masks, positions) go there too
    with h5py.File(path, "r") as f:
        raw = f.attrs["config_toml"]
        cfg = tomllib.loads(raw.decode() if isinstance(raw, bytes) else raw)
        load = lambda g: {n: torch.from_numpy(f[g][n][()].astype(np.float32)).to(device)
                          for n in f[g]} if g in f else {}
        params = {n: t.requires_grad_(True) for n, t in load("before/params").items()}
        buffers = load("before/buffers")
        inputs = torch.from_numpy(f["batch/inputs"][()].astype(np.int64)).to(device)
        targets = torch.from_numpy(f["batch/targets"][()].astype(np.int64)).to(device)
    opt, train = cfg["optimizer"], cfg["training"]
    groups = [{"params": [t for t in params.values() if t.dim() >= 2], "weight_decay": opt["weight_decay"]},
              {"params": [t for t in params.values() if t.dim() < 2], "weight_decay": 0.0}]
    adam = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    gamma = cfg["model"]["moe"]["bias_update_speed"]
    micro = train["micro_batch"]
    times = []
    for step in range(steps):
        start = time.perf_counter()
        model = Reference(cfg, params, buffers)
        adam.zero_grad()
        for mb in range(0, inputs.shape[0], micro):  # gradient accumulation, as moetrain does
            with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
                objective = model.loss(inputs[mb:mb + micro], targets[mb:mb + micro])[0]
            (objective * micro / inputs.shape[0]).backward()
        if train["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), train["grad_clip"])
        for g in adam.param_groups:
            g["lr"] = learning_rate(cfg, step)
        adam.step()
        with torch.no_grad():
            for pre, load_ in model.loads.items():
                buffers[pre + ".router_bias"] += gamma * torch.sign(load_.mean() - load_)
        if device == "cuda":
            torch.cuda.synchronize()  # the step's kernels are queued; time them, not their launch
        times.append(time.perf_counter() - start)
    tokens = inputs.numel()
    median = statistics.median(times[3:])
    print(f"pytorch {torch.__version__}: median {tokens / median:.0f} tokens/s over steps 4..{steps} "
          f"({device}, {'bf16 autocast' if precision == 'bf16' else 'float32'}, {threads} threads)")


if __name__ == "__main__":
    main()
