"""Checks a `moetrain dump-step` file against the PyTorch reference.

    python check_step.py STEP.h5 [STEP.h5 ...] [--tol T]

Checks that the dumped batch is the run's first global batch in its data order (data_order.py
reads the shards itself). Recomputes the step in float64 from the dumped weights and batch, with the
GEMM inputs rounded as the step's precision.matmul rounds them (gemm_arithmetic.py): the loss, the
logits, every parameter gradient, the gradient norm, the balancing-bias update and one optimizer
step (PyTorch's own torch.optim.AdamW; under optimizer.kind = "muon" torch.optim.Muon for the hidden
matrices, muon_reference.py). Prints PASS or FAIL per check with its relative error (max |moetrain -
reference| / max |reference|) and exits 1 on any failure; the bounds are TOLERANCES below, or T for
every check of the recomputed step.
"""
import argparse
import contextlib
import glob
import io
import sys
import tomllib
from pathlib import Path

import h5py
import numpy as np
import torch

from data_order import window
from gemm_arithmetic import Arithmetic
from muon_reference import is_muon, muon_step
from qk_clip_reference import qk_clip
from reference_model import Reference, learning_rate


def first_batch(cfg):
    """Inputs and targets of sequences 0..global_batch-1 of the run, from the training shards."""
    files = sorted(glob.glob(cfg["data"]["train"]))
    stream = np.concatenate([np.fromfile(p, dtype=np.uint16, offset=256 * 4) for p in files]).astype(np.int64)
    seq = cfg["model"]["seq_len"]
    windows = (len(stream) - seq - 1) // seq + 1
    rows = [window(cfg["run"]["seed"], windows, i, cfg["data"]["shuffle"]) * seq
            for i in range(cfg["training"]["global_batch"])]
    return np.stack([stream[r:r + seq] for r in rows]), np.stack([stream[r + 1:r + seq + 1] for r in rows])


def read_group(f, group):
    out = {}
    if group not in f:  # e.g. buffers of a model without MoE layers
        return out
    f[group].visititems(lambda name, obj: out.__setitem__(name, torch.from_numpy(obj[()].astype(np.float64)))
                        if isinstance(obj, h5py.Dataset) else None)
    return out


# Relative errors allowed (to the largest reference magnitude) by the step's GEMM precision and device,
# argued in docs/tests.md. The reference models each precision's rounding (gemm_arithmetic.py), so what
# remains is float32 against float64, plus the rare element that float32 puts on the other side of a
# rounding boundary: a bfloat16 or FP8 "flip", whose effect spreads to the token's later values and to
# every gradient its backward reaches. "logits" and "grads" bound every element (of each gradient),
# "..._median" the median element, which flips leave alone; "scalar" the losses.
TOLERANCES = {
    "fp32": {"logits": 1e-5, "logits_median": 1e-5, "grads": 1e-5, "grads_median": 1e-5, "scalar": 1e-5,
             "grad_norm": 1e-5},
    "bf16": {"logits": 5e-3, "logits_median": 1e-5, "grads": 2e-2, "grads_median": 1.5e-3, "scalar": 5e-5,
             "grad_norm": 5e-4},
    "fp8": {"logits": 1e-3, "logits_median": 1e-5, "grads": 1e-3, "grads_median": 1e-5, "scalar": 1e-5,
            "grad_norm": 1e-5},
}
# On cuda the products sum in another order, the FP8 tensor cores keep about 14 bits of the running sum
# and attention rounds the unnormalised probabilities of its tiles: bf16's bounds for fp8 too, and the
# medians of a flip-dominated step (not yet measured on a GPU).
CUDA_LOW_PRECISION = {"logits": 2e-2, "logits_median": 1e-3, "grads": 5e-2, "grads_median": 5e-3, "scalar": 1e-4,
                      "grad_norm": 2e-3}


def tolerances(cfg, override):
    matmul, device = cfg["precision"]["matmul"], cfg["precision"]["device"]
    tol = dict(CUDA_LOW_PRECISION if device == "cuda" and matmul != "fp32" else TOLERANCES[matmul])
    if override is not None:
        tol = {k: override for k in tol}
    return tol


class Report:
    def __init__(self):
        self.failed, self.passed = 0, 0

    def compare(self, name, got, want, tol=1e-5, median=None):
        """The largest relative error; with `median`, the median element's must stay below it too."""
        got, want = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64)
        scale = want.abs().max().item()
        errors = (got - want).abs() / (scale if scale > 0 else 1.0) if got.shape == want.shape else torch.ones(1)
        err, mid = errors.max().item(), errors.median().item()
        ok = err <= tol and (median is None or mid <= median) and got.shape == want.shape
        self.passed += ok
        self.failed += not ok
        if not ok:
            print(f"FAIL {name}: relative error {err:.2e}, median {mid:.2e} "
                  f"(shape {tuple(got.shape)} vs {tuple(want.shape)})")
        return err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dumps", nargs="+", metavar="dump")
    ap.add_argument("--tol", type=float, help="one tolerance for every check of the step (default: TOLERANCES)")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)  # tensors of a few thousand values: more threads only cost time
    # Many dumps in one process: importing torch costs more than checking a step. Each dump's lines
    # also go to DUMP.check, which run_oracle.sh reads back.
    failed = 0
    for dump in args.dumps:
        lines = io.StringIO()
        try:
            with contextlib.redirect_stdout(lines):
                ok = check(dump, args.tol)
        except Exception as e:  # one damaged dump fails alone
            print(f"FAIL {dump}: {type(e).__name__}: {e}", file=lines)
            ok = False
        failed += not ok
        Path(dump + ".check").write_text(lines.getvalue())
        print(lines.getvalue(), end="")
    return 1 if failed else 0


def check_qk_clip(report, cfg, maxima, head_max, clipped):
    """moetrain's per-head largest logits (floored at 0: its buffer starts at zero) and heads clipped per
    layer against the reference's; fails unless some head is clipped, which the configurations are for."""
    want = torch.stack([s.clamp(min=0) for s in maxima.values()])
    worst = report.compare("qk_clip head_max_logit", head_max, want)
    tau = cfg["optimizer"]["qk_clip"]["tau"]
    counts = torch.stack([(s > tau).sum() for s in maxima.values()]).to(torch.float64)
    report.compare("qk_clip clipped_heads", clipped, counts, 0.0)
    if counts.sum() == 0:
        report.failed += 1
        print(f"FAIL qk_clip: no head's largest logit exceeds tau = {tau}: the check clips nothing")
    return worst


def check(dump, one_tol):
    """Checks one dump-step file, printing a FAIL line per failed check and a last PASS/FAIL line."""
    report = Report()
    worst = {}

    with h5py.File(dump, "r") as f:
        cfg = tomllib.loads(f.attrs["config_toml"].decode() if isinstance(f.attrs["config_toml"], bytes)
                            else f.attrs["config_toml"])
        before, buffers = read_group(f, "before/params"), read_group(f, "before/buffers")
        grads, after = read_group(f, "grads"), read_group(f, "after/params")
        after_buffers = read_group(f, "after/buffers")
        exp_avg, exp_avg_sq = read_group(f, "after/exp_avg"), read_group(f, "after/exp_avg_sq")
        # dump-step --from: the checkpoint's optimizer state, which the step continues.
        state_before = (read_group(f, "before/exp_avg"), read_group(f, "before/exp_avg_sq"))
        inputs = torch.from_numpy(f["batch/inputs"][()].astype(np.int64))
        targets = torch.from_numpy(f["batch/targets"][()].astype(np.int64))
        logits = torch.from_numpy(f["logits"][()].astype(np.float64))
        loads = torch.from_numpy(f["expert_load"][()].astype(np.float64)) if "expert_load" in f else None
        attrs = {k: float(f.attrs[k]) for k in ("loss", "aux_loss", "mtp_loss", "grad_norm", "lr")}
        head_max = torch.from_numpy(f["qk_clip/head_max_logit"][()].astype(np.float64)) if "qk_clip" in f else None
        clipped = torch.from_numpy(f["qk_clip/clipped_heads"][()].astype(np.float64)) if "qk_clip" in f else None

    tol = tolerances(cfg, one_tol)
    want_inputs, want_targets = first_batch(cfg)
    same_batch = np.array_equal(inputs.numpy(), want_inputs) and np.array_equal(targets.numpy(), want_targets)
    report.failed += not same_batch
    report.passed += same_batch
    if not same_batch:
        print(f"FAIL batch: not sequences 0..{len(want_inputs) - 1} of the run in its data order "
              f"(data.shuffle = {str(cfg['data']['shuffle']).lower()}, run.seed = {cfg['run']['seed']})")

    params = {n: t.clone().requires_grad_(True) for n, t in before.items()}
    micro_rows = cfg["training"]["micro_batch"] * cfg["model"]["seq_len"]
    model = Reference(cfg, params, buffers, Arithmetic(cfg, micro_rows))
    objective, ce, aux, mtp, ref_logits = model.loss(inputs, targets)
    objective.backward()

    worst["logits"] = report.compare("logits", logits, ref_logits.detach(), tol["logits"], tol["logits_median"])
    worst["loss"] = report.compare("loss", attrs["loss"], ce.item(), tol["scalar"])
    if cfg["model"]["moe"]["aux_loss"] != "none":
        worst["aux_loss"] = report.compare("aux_loss", attrs["aux_loss"], torch.as_tensor(aux).item(), tol["scalar"])
    if cfg["model"]["mtp"]["depth"] > 0:
        worst["mtp_loss"] = report.compare("mtp_loss", attrs["mtp_loss"], torch.as_tensor(mtp).item(), tol["scalar"])
    worst["grads"] = max(report.compare(f"grad {n}", grads[n], params[n].grad, tol["grads"], tol["grads_median"])
                         for n in params)
    norm = torch.sqrt(sum((params[n].grad ** 2).sum() for n in params))
    worst["grad_norm"] = report.compare("grad_norm", attrs["grad_norm"], norm.item(), tol["grad_norm"])

    # The balancing bias: +gamma below the mean load of the step, -gamma above (report 2.1.2).
    moe_cfg, tokens = cfg["model"]["moe"], inputs.numel()
    for i, (pre, load) in enumerate(model.loads.items()):
        if loads is not None:
            report.compare(f"expert_load {pre}", loads[i], load / (tokens * moe_cfg["top_k"]))
        want = buffers[pre + ".router_bias"] + moe_cfg["bias_update_speed"] * torch.sign(load.mean() - load)
        worst["bias"] = max(worst.get("bias", 0), report.compare(f"bias {pre}", after_buffers[pre + ".router_bias"], want))

    # One AdamW step with PyTorch's optimizer, after global-norm clipping; decay on matrices only.
    # It starts from moetrain's own gradients: a first Adam step is nearly sign(g), so gradient
    # entries close to zero would turn float32 rounding into large update differences.
    clip, moetrain_norm = cfg["training"]["grad_clip"], torch.sqrt(sum((g ** 2).sum() for g in grads.values()))
    with torch.no_grad():
        for n, t in params.items():
            t.grad = grads[n].clone()
            if clip > 0 and moetrain_norm > clip:
                t.grad *= clip / moetrain_norm
    # Under optimizer.kind = "muon" torch.optim.Muon updates the hidden matrices (muon_reference.py)
    # and AdamW the rest; Muon's momentum buffer is moetrain's exp_avg, its exp_avg_sq zero.
    opt, lr = cfg["optimizer"], learning_rate(cfg, 0)
    muon = {n for n, t in params.items() if is_muon(n, t, cfg)}
    adamw = {n: t for n, t in params.items() if n not in muon}
    groups = [{"params": [t for t in adamw.values() if t.dim() >= 2], "weight_decay": opt["weight_decay"]},
              {"params": [t for t in adamw.values() if t.dim() < 2], "weight_decay": 0.0}]
    adam = torch.optim.AdamW(groups, lr=lr, betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    if state_before[0]:  # the moments of a first step, bias-corrected as such (moetrain's t = 1)
        for n, t in adamw.items():
            adam.state[t] = {"step": torch.tensor(0.0), "exp_avg": state_before[0][n].clone(),
                             "exp_avg_sq": state_before[1][n].clone()}
    adam.step()
    momentum = muon_step(params, cfg, lr, state_before[0])
    state = {n: (adam.state[t]["exp_avg"], adam.state[t]["exp_avg_sq"]) for n, t in adamw.items()}
    state.update({n: (momentum[n], torch.zeros_like(momentum[n])) for n in muon})
    worst["lr"] = report.compare("lr", attrs["lr"], lr)
    if cfg["optimizer"].get("qk_clip", {}).get("enabled", False):
        worst["qk_clip"] = check_qk_clip(report, cfg, model.maxima, head_max, clipped)
        qk_clip(params, cfg, model.maxima)
    worst["params_after"] = max(report.compare(f"after {n}", after[n], params[n].detach()) for n in params)
    # The update itself, from float32 before/after values: their rounding (an ulp of a weight near
    # 1 is 1e-7, an update 1e-4) limits its precision to about 1e-3.
    worst["update"] = max(report.compare(f"update {n}", after[n] - before[n], params[n].detach() - before[n], 2e-3)
                          for n in params)
    worst["exp_avg"] = max(report.compare(f"exp_avg {n}", exp_avg[n], state[n][0]) for n in params)
    worst["exp_avg_sq"] = max(report.compare(f"exp_avg_sq {n}", exp_avg_sq[n], state[n][1]) for n in params)

    summary = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
    print(f"{'PASS' if report.failed == 0 else 'FAIL'} {dump}: {report.passed} checks, worst relative errors: {summary}")
    return report.failed == 0


if __name__ == "__main__":
    sys.exit(main())
