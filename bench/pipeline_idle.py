"""One table row: a schedule's measured idle fraction (from log.h5: the mean over ranks, the
median over steps) and the simulator's."""
import json
import sys

import h5py
import numpy as np

kind, log_path, sim_path = sys.argv[1:4]
with h5py.File(log_path, "r") as f:
    table = f["timing/rank_phases"]
    names = table.attrs["phases"].decode().split(",")
    phases = np.array(table)[2:]  # [steps, ranks, phases], the first two steps warm up
wait, step, compute = (phases[:, :, names.index(n)] for n in ("pipeline_wait", "step", "compute"))
measured = float(np.median(np.mean(wait / step, axis=1)))
sim = json.load(open(sim_path))
simulated = float(np.mean(sim["bubble"])) / sim["makespan"]
print(f"| {kind} | {100 * measured:.1f}% | {100 * simulated:.1f}% | {1000 * float(np.mean(compute)):.1f} |")
