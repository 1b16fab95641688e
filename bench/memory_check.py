"""The planner's memory per rank against what the trainer holds, layout by layout.

For each layout below, `moetrain train` runs one step of configs/tiny.toml on CPU ranks (mpirun)
and prints its closing `memory:` line (the most of any rank: weights, gradients, optimizer state,
activation arenas); `moetrain train --dry-run --cluster` prints the planner's figures for the same
layout with moetrain's own storage (FP32). Prints a Markdown table and the worst relative error
of the totals. Usage: python3 bench/memory_check.py (from the repository, after `make`)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from cpu_layouts import MPIRUN, TWO_RANKS

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
moetrain = os.path.join(repo, "moetrain")
cluster = "configs/clusters/h100-superpod.toml"

# name, ranks, --set arguments
layouts = [
    ("1 rank", 1, []),
    ("1 rank, selective", 1, ["training.recompute=selective"]),
    ("1 rank, full", 1, ["training.recompute=full"]),
    ("1 rank, MLA", 1, ["model.attention.kind=mla"]),
    ("1 rank, MTP 1", 1, ["model.mtp.depth=1"]),
    ("1 rank, MTP 1, head unchunked", 1, ["model.mtp.depth=1", "model.head_chunk_tokens=0"]),
    ("1 rank, MTP 1, head chunks of 128", 1, ["model.mtp.depth=1", "model.head_chunk_tokens=128"]),
    ("1 rank, FP8, codes beside activations", 1, ["precision.matmul=fp8"]),
    ("1 rank, FP8, codes in the GEMMs", 1, ["precision.matmul=fp8", "fp8.fused_codes=false"]),
    *TWO_RANKS,
    ("pp=1 dualpipev", 1, ["parallel.schedule=dualpipev", "training.micro_batch=2"]),
    ("pp=2 1f1b, full", 2, ["parallel.pp=2", "training.micro_batch=2", "training.recompute=full"]),
    ("dp=2 zero=2, MLA, MTP 1", 2, ["parallel.dp=2", "parallel.zero=2", "model.attention.kind=mla", "model.mtp.depth=1"]),
    ("dp=2 ep=2 zero=2, full", 2, ["parallel.dp=2", "parallel.ep=2", "parallel.zero=2", "training.recompute=full"]),
    ("dp=2 zero=3, MLA, MTP 1", 2, ["parallel.dp=2", "parallel.zero=3", "model.attention.kind=mla", "model.mtp.depth=1"]),
    ("tp=2 sp, MLA, MTP 1", 2, ["parallel.tp=2", "parallel.sequence_parallel=true", "model.attention.kind=mla",
                                "model.mtp.depth=1"]),
    ("tp=2 sp, selective", 2, ["parallel.tp=2", "parallel.sequence_parallel=true", "training.recompute=selective"]),
    ("tp=2 sp, full", 2, ["parallel.tp=2", "parallel.sequence_parallel=true", "training.recompute=full"]),
    ("tp=2 pp=2 sp 1f1b", 4, ["parallel.tp=2", "parallel.pp=2", "parallel.sequence_parallel=true",
                              "training.micro_batch=2"]),
]

number = r"([0-9.]+)"
measured_re = re.compile(rf"^memory: .*weights {number} MB, gradients {number} MB, optimizer {number} MB, "
                         rf"activations {number} MB", re.M)
predicted_re = re.compile(rf"^  memory +{number} (MB|GB) per rank \(weights {number}, gradients {number}, "
                          rf"optimizer {number}, activations {number}\)", re.M)


def run(cmd, cwd):
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout[-800:]}{out.stderr[-800:]}")
    return out.stdout


work = tempfile.mkdtemp()
try:
    print("| layout | measured MB: weights, grads, optimizer, activations | planned MB | total error |")
    print("|---|---|---|---|")
    worst = 0.0
    for name, ranks, sets in layouts:
        args = ["train", os.path.join(repo, "configs/tiny.toml"), "--set", "training.steps=1",
                "--set", "training.eval_every=0", "--set", f"run.out_dir={work}", "--set", f"run.name=r{len(name)}{ranks}"]
        for s in sets:
            args += ["--set", s]
        launch = (MPIRUN + ["-np", str(ranks)]) if ranks > 1 else []
        got = measured_re.search(run(launch + [moetrain] + args, repo))
        shutil.rmtree(os.path.join(work, f"r{len(name)}{ranks}"), ignore_errors=True)
        plan = predicted_re.search(run([moetrain] + args + ["--dry-run", "--cluster", cluster], repo))
        scale = 1000.0 if plan.group(2) == "GB" else 1.0
        m = [float(got.group(i)) for i in range(1, 5)]
        p = [float(plan.group(i)) * scale for i in range(3, 7)]
        error = sum(p) / sum(m) - 1
        worst = max(worst, abs(error))
        print(f"| {name} | {', '.join(f'{x:.1f}' for x in m)} | {', '.join(f'{x:.1f}' for x in p)} | {100 * error:+.1f}% |")
    print(f"\nworst total error {100 * worst:.1f}%")
finally:
    shutil.rmtree(work, ignore_errors=True)
