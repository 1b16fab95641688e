#!/usr/bin/env bash
# CPU training throughput of an experiment (default: the demo, configs/tiny.toml).
# Runs STEPS steps (default 60) as a fresh run under /tmp, then reports the median of the
# per-step tokens/s that log.h5 recorded after the first 5 steps, and the machine.
#   bash bench/cpu_tokens_per_sec.sh [EXPERIMENT.toml] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
exp=${1:-configs/tiny.toml}
steps=${2:-60}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
./moetrain train "$exp" --set run.out_dir="$out" --set run.name=bench --set training.steps="$steps" \
  --set training.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never --set log.every=1000000 >/dev/null
h5dump -d /tokens_per_s -y -w 0 "$out/bench/log.h5" | tr ',' '\n' | grep -E '^ *[0-9.e+-]+ *$' | tail -n +6 | sort -g |
  awk -v experiment="$exp" -v steps="$steps" '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
    printf "%s: median %.0f tokens/s over steps 6..%d (min %.0f, max %.0f)\n", experiment, m, steps, v[1], v[NR] }'
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), OpenBLAS threads: ${OPENBLAS_NUM_THREADS:-default}"
