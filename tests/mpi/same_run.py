"""Compares two moetrain runs: per-step and eval losses (relative difference below a bound) and every
array of their final checkpoints, whatever layouts wrote them (slices are assembled by global
name and range). Prints one PASS or FAIL line."""
import glob
import sys

import h5py
import numpy as np

name, run_a, run_b, step = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ranks_b = int(sys.argv[5]) if len(sys.argv) > 5 else 1
layout_b = sys.argv[6].split(",") if len(sys.argv) > 6 else []  # keys of [parallel] run b set, "dp=2"
import os

# Relative bounds on losses and on final weights; SAME_RUN_WEIGHT_BOUND=none reports the weight
# difference without judging it (FP8 under tensor parallelism, see run_mpi_tests.sh).
bound = float(os.environ.get("SAME_RUN_LOSS_BOUND", "1e-5"))
weight_bound = os.environ.get("SAME_RUN_WEIGHT_BOUND", "1e-5")


def arrays(step_dir):
    """Every array of a checkpoint, whole: slices placed by their global_shape/split_dim/split_start."""
    out = {}

    def place(name, d):
        if not isinstance(d, h5py.Dataset):
            return
        if "global_shape" not in d.attrs:
            out[name] = np.array(d)
            return
        whole = out.setdefault(name, np.full(tuple(d.attrs["global_shape"]), np.nan, dtype=np.float32))
        dim, start = int(d.attrs["split_dim"]), int(d.attrs["split_start"])
        index = [slice(None)] * whole.ndim
        if dim >= 0:
            index[dim] = slice(start, start + d.shape[dim])
        whole[tuple(index)] = np.array(d)

    for path in sorted(glob.glob(f"{step_dir}/rank_*.h5")):
        with h5py.File(path, "r") as f:
            f.visititems(place)
    return out


problems = []
with h5py.File(f"{run_a}/log.h5", "r") as a, h5py.File(f"{run_b}/log.h5", "r") as b:
    la, lb = np.array(a["loss"]), np.array(b["loss"])
    if la.shape != lb.shape or la.size != step:
        problems.append(f"loss rows {la.size} and {lb.size}, wanted {step}")
    else:
        rel = np.max(np.abs(la - lb) / np.abs(la))
        if rel >= bound:
            problems.append(f"losses differ by {rel:.1e} (relative)")
    written = b.attrs["layout"].decode() if isinstance(b.attrs["layout"], bytes) else b.attrs["layout"]
    for kv in layout_b:
        token = kv.replace('"', "")
        if token.startswith("schedule="):  # the layout text names the schedule alone, as plan prints it
            token = token.split("=", 1)[1]
        if token == "sequence_parallel=true":  # and sequence parallelism as "sp"
            token = "sp"
        if token not in written.split():
            problems.append(f"log.h5 layout attribute '{written}' lacks {kv}")
    # Run b's log times every phase of every rank's step.
    phases = np.array(b["timing/rank_phases"])
    names = b["timing/rank_phases"].attrs["phases"].decode().split(",")
    if phases.shape != (step, ranks_b, len(names)):
        problems.append(f"timing/rank_phases has shape {phases.shape}, wanted {(step, ranks_b, len(names))}")
    else:
        # A resumed run keeps earlier steps of another layout as all-NaN rows (unknown timings).
        known = phases[~np.all(np.isnan(phases), axis=(1, 2))]
        if known.shape[0] == 0 or not np.all(np.isfinite(known)) or np.any(known < 0) or \
                np.any(known[:, :, names.index("compute")] <= 0):
            problems.append("timing/rank_phases holds negative, missing or zero compute times")
    # QK-Clip: the step's largest logit per layer and the heads clipped, gathered over every rank.
    if "attention" in a or "attention" in b:
        if "attention" not in a or "attention" not in b:
            problems.append("one log lacks QK-Clip's /attention series")
        else:
            ma, mb = np.array(a["attention/max_logit"]), np.array(b["attention/max_logit"])
            ca, cb = np.array(a["attention/clipped_heads"]), np.array(b["attention/clipped_heads"])
            if ma.shape != mb.shape or np.max(np.abs(ma - mb) / np.maximum(np.abs(ma), 1e-30)) >= bound:
                problems.append(f"attention/max_logit differs: {ma.tolist()} vs {mb.tolist()}")
            elif not np.array_equal(ca, cb) or ca.sum() == 0:
                problems.append(f"attention/clipped_heads {ca.tolist()} vs {cb.tolist()} (none: nothing tested)")
    ea, eb = np.array(a["eval/loss"]), np.array(b["eval/loss"])
    if ea.shape != eb.shape:
        problems.append(f"eval rows {ea.size} and {eb.size}")
    elif ea.size and np.max(np.abs(ea - eb) / np.abs(ea)) >= bound:
        problems.append(f"eval losses differ by {np.max(np.abs(ea - eb) / np.abs(ea)):.1e} (relative)")
ckpt = f"ckpt/step_{step:08d}"
wa, wb = arrays(f"{run_a}/{ckpt}"), arrays(f"{run_b}/{ckpt}")
if wa.keys() != wb.keys():
    problems.append("checkpoints hold different arrays")
worst = 0.0
for k in sorted(wa.keys() & wb.keys()):
    if np.isnan(wa[k]).any() or np.isnan(wb[k].astype(np.float64)).any():
        problems.append(f"{k} is not whole in one of the checkpoints")
for k in wa.keys() & wb.keys():
    x, y = wa[k].astype(np.float64), wb[k].astype(np.float64)
    scale = max(np.max(np.abs(x)), 1e-30) if x.size else 1
    worst = max(worst, float(np.max(np.abs(x - y))) / scale if x.size else 0)
if weight_bound != "none" and worst >= float(weight_bound):
    problems.append(f"final weights differ by {worst:.1e} (relative to each array's largest value)")
print(("FAIL " if problems else "PASS ") + name + (": " + "; ".join(problems) if problems else f" (weights within {worst:.1e}{', not bounded' if weight_bound == 'none' else ''})"))
