"""The planner's step times against measured ones, layout by layout, on CPU ranks.

Every layout of two ranks below trains configs/tiny.toml for 8 steps under mpirun, each rank one
core (OpenBLAS on one thread); the measured rate is the median tokens/s of steps 3-8 in log.h5.
The planner predicts the same layout on bench/cpu_ranks.toml, this VM's two cores as a cluster,
whose one fitted number (the matmul efficiency) comes from the one-rank run. The check is on the
relative step times: each layout's time over dp=2's, predicted against measured. Prints a
Markdown table. Usage: .venv/bin/python bench/step_time_check.py (needs h5py; after `make`)."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import h5py

from cpu_layouts import MPIRUN, TWO_RANKS

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
moetrain = os.path.join(repo, "moetrain")
cluster = os.path.join(repo, "bench/cpu_ranks.toml")
env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

# The one-rank fit, then the two-rank layouts; dp=2 is the reference of the ratios.
layouts = [("1 rank (the fit)", 1, []), *TWO_RANKS]
predicted_re = re.compile(r"^  step +[0-9.]+ s predicted: MFU [0-9.]+%, ([0-9.]+) tokens/s per accelerator", re.M)


def run(cmd):
    out = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout[-800:]}{out.stderr[-800:]}")
    return out.stdout


work = tempfile.mkdtemp()
try:
    rows = []
    for i, (name, ranks, sets) in enumerate(layouts):
        args = ["train", "configs/tiny.toml", "--set", "training.steps=8", "--set", "training.eval_every=0",
                "--set", "checkpoint.every=0", "--set", f"run.out_dir={work}", "--set", f"run.name=l{i}"]
        for s in sets:
            args += ["--set", s]
        run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + [moetrain] + args)
        with h5py.File(os.path.join(work, f"l{i}", "log.h5"), "r") as f:
            measured = statistics.median(f["tokens_per_s"][2:])
        predicted = float(predicted_re.search(run([moetrain] + args + ["--dry-run", "--cluster", cluster])).group(1))
        rows.append((name, ranks, measured, predicted * ranks))
    ref = next(r for r in rows if r[1] == 2)
    print("| layout | measured tokens/s | predicted tokens/s | step time / dp=2's: measured | predicted | error |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for name, ranks, measured, predicted in rows:
        m, p = ref[2] / measured, ref[3] / predicted
        error = p / m - 1
        if ranks == 2:
            worst = max(worst, abs(error))
        print(f"| {name} | {measured:.0f} | {predicted:.0f} | {m:.2f} | {p:.2f} | {100 * error:+.0f}% |")
    print(f"\nworst error of a two-rank layout's relative step time {100 * worst:.0f}%")
finally:
    shutil.rmtree(work, ignore_errors=True)
