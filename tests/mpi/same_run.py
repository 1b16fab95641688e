"""Compares two moetrain runs: per-step losses (relative difference below a bound) and every
array of their final checkpoints. Prints one PASS or FAIL line."""
import sys

import h5py
import numpy as np

name, run_a, run_b, step = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
bound = 1e-5


def arrays(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda k, v: out.__setitem__(k, np.array(v)) if isinstance(v, h5py.Dataset) else None)
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
ckpt = f"ckpt/step_{step:08d}/rank_00000.h5"
wa, wb = arrays(f"{run_a}/{ckpt}"), arrays(f"{run_b}/{ckpt}")
if wa.keys() != wb.keys():
    problems.append("checkpoints hold different arrays")
worst = 0.0
for k in wa.keys() & wb.keys():
    x, y = wa[k].astype(np.float64), wb[k].astype(np.float64)
    scale = max(np.max(np.abs(x)), 1e-30) if x.size else 1
    worst = max(worst, float(np.max(np.abs(x - y))) / scale if x.size else 0)
if worst >= bound:
    problems.append(f"final weights differ by {worst:.1e} (relative to each array's largest value)")
print(("FAIL " if problems else "PASS ") + name + (": " + "; ".join(problems) if problems else f" (weights within {worst:.1e})"))
