#!/usr/bin/env bash
# FP8 against BF16 on the CPU (the emulation of DeepSeek-V3's recipe), with the two ablations a
# reviewer asks for: per-tensor scaling, and a 14-bit accumulator never promoted to fp32. Trains
# each for STEPS steps (default 1000) and prints the smoothed loss every 100 steps beside BF16's.
#   bash bench/fp8_curves.sh [EXPERIMENT.toml] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
exp=${1:-configs/deepseek-v3-small.toml}
steps=${2:-1000}
out=${OUT_DIR:-$(mktemp -d)}
run() {  # run NAME --set ...: in the background, one thread each
  local name=$1; shift
  OPENBLAS_NUM_THREADS=1 ./moetrain train "$exp" --set run.out_dir="$out" --set run.name="$name" \
    --set training.steps="$steps" --set training.eval_every=0 --set checkpoint.every=0 \
    --set checkpoint.resume=never --set log.every=100 "$@" > "$out/$name.txt" 2>&1 &
}
run bf16 --set precision.matmul=bf16
run fp8 --set precision.matmul=fp8
run fp8_tensor --set precision.matmul=fp8 --set fp8.scaling=tensor
run fp8_nopromote --set precision.matmul=fp8 --set fp8.accumulator_bits=14 --set fp8.promote_every=0
wait
.venv/bin/python bench/fp8_curves.py "$out/bf16/log.h5" "$out/fp8/log.h5" "$out/fp8_tensor/log.h5" \
  "$out/fp8_nopromote/log.h5"
echo "experiment: $exp, $steps steps; machine: $(nproc) cores; runs in $out"
