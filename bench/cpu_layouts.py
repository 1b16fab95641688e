"""What bench/memory_check.py and bench/step_time_check.py share: the launcher for CPU ranks and
the two-rank layouts both set beside the planner (name, ranks, `--set` arguments)."""
import os

MPIRUN = ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])

TWO_RANKS = [
    ("dp=2", 2, ["parallel.dp=2"]),
    ("dp=2 zero=1", 2, ["parallel.dp=2", "parallel.zero=1"]),
    ("dp=2 zero=2", 2, ["parallel.dp=2", "parallel.zero=2"]),
    ("dp=2 zero=3", 2, ["parallel.dp=2", "parallel.zero=3"]),
    ("tp=2", 2, ["parallel.tp=2"]),
    ("tp=2 sp", 2, ["parallel.tp=2", "parallel.sequence_parallel=true"]),
    ("dp=2 ep=2", 2, ["parallel.dp=2", "parallel.ep=2"]),
    ("pp=2 1f1b", 2, ["parallel.pp=2", "training.micro_batch=2"]),
    ("pp=2 gpipe", 2, ["parallel.pp=2", "parallel.schedule=gpipe", "training.micro_batch=2"]),
    ("pp=2 zb-h1", 2, ["parallel.pp=2", "parallel.schedule=zb-h1", "training.micro_batch=2"]),
    ("pp=2 dualpipe", 2, ["parallel.pp=2", "parallel.schedule=dualpipe", "training.micro_batch=2"]),
    ("pp=2 dualpipev", 2, ["parallel.pp=2", "parallel.schedule=dualpipev", "training.micro_batch=2"]),
]
