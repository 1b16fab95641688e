#!/usr/bin/env bash
# Wall time of `moetrain plan`'s unconstrained search for the three cases of docs/planner.md
# (median of 3 runs each), and the layout each picks.
set -eu
cd "$(dirname "$0")/.."
make -s moetrain
run() {
  local name=$1; shift
  local times=() t0 t1 best
  for i in 1 2 3; do
    t0=$(date +%s.%N); best=$(./moetrain plan "$@" --top 1 | tail -n 1); t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc)")
  done
  printf '%-40s median %.2f s | %s\n' "$name" "$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)" "$best"
}
run "DeepSeek-V3, 2048 H800, FP8" configs/deepseek-v3.toml --cluster configs/clusters/h800-deepseek.toml --fp8
run "DeepSeek-V3, 2048 GB200 NVL72, FP8" configs/deepseek-v3.toml --cluster configs/clusters/gb200-nvl72.toml --gpus 2048 --fp8
run "Llama-3-70B, 4096 TPU v5p" configs/llama3-70b.toml --cluster configs/clusters/tpu-v5p-pod.toml --gpus 4096
