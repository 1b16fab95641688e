#!/usr/bin/env bash
# The pre-check's host memory estimate (parallel/memory_estimate.hpp) against the peak resident memory
# (/usr/bin/time's maximum resident set size) of 2 training steps, their evaluation and checkpoint
# included, for each shipped config that fits the machine and for reduced ones that span the terms.
# A case whose estimate is over LIMIT_GB (default 8) is not run: the script shows instead that the
# pre-check refuses it where it does not fit. Not a timed test: the moe-1b cases take about a minute.
#   bash bench/memory_estimate.sh [LIMIT_GB]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-8}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Byte-level shards stand in for configs whose corpus is not prepared: memory does not depend on the text.
fortunes="--set data.train=\"data/fortunes/train_*.bin\" --set data.val=\"data/fortunes/val_*.bin\""
cases=(
  "configs/tiny.toml"
  "configs/tiny.toml --set training.micro_batch=16 --set training.recompute=\"full\""
  "configs/deepseek-v3-small.toml"
  "configs/gcide.toml $fortunes"
  "configs/moe-1b.toml --set model.n_layers=2 --set model.d_model=512 --set training.global_batch=4"
  "configs/moe-1b.toml --set model.n_layers=3 --set model.d_model=768"\
" --set training.micro_batch=1 --set training.global_batch=1"
  "configs/moe-1b.toml --set model.n_layers=2 --set model.d_model=256"\
" --set training.micro_batch=16 --set training.global_batch=16"
  "configs/moe-1b.toml --set precision.matmul=\"fp32\" --set model.n_layers=2 --set model.d_model=512"\
" --set training.global_batch=4"
  "configs/moe-1b.toml"
  "configs/deepseek-v3.toml $fortunes"
  "configs/llama3-70b.toml $fortunes"
)
available=$(awk '/^MemAvailable:/ {printf "%.3f", $2 * 1024 / 1e9}' /proc/meminfo)
printf '%-120s %10s %10s %8s\n' "case (2 steps)" "estimate" "measured" "error"
for c in "${cases[@]}"; do
  eval "args=($c)"
  common=(--set training.steps=2 --set run.out_dir="\"$out\"" --set run.name='"bench"'
          --set checkpoint.resume='"never"')
  # An available memory of one byte makes every run refuse, printing its estimate.
  MOETRAIN_MEMORY_AVAILABLE=1 ./moetrain train "${args[@]}" "${common[@]}" > "$out/estimate" 2>&1
  estimate=$(awk '$3 == "peak" { print $1 }' "$out/estimate")
  needed=$(awk '$3 == "needed" { print $1 }' "$out/estimate")
  if awk -v e="$estimate" -v l="$limit" 'BEGIN { exit !(e > l) }'; then
    if awk -v n="$needed" -v a="$available" 'BEGIN { exit !(n > a) }'; then
      ./moetrain train "${args[@]}" "${common[@]}" > "$out/refusal" 2>&1
      verdict="refused here (exit $?; needs $needed GB, $available GB available)"
    else
      verdict="fits here ($needed GB of $available GB): not run, over the ${limit} GB measuring limit"
    fi
    printf '%-120s %7s GB %s\n' "$c" "$estimate" "$verdict"
    continue
  fi
  rm -rf "$out/bench"
  /usr/bin/time -v ./moetrain train "${args[@]}" "${common[@]}" > "$out/log" 2>&1
  measured=$(awk '/Maximum resident set size/ { printf "%.3f", $6 * 1024 / 1e9 }' "$out/log")
  if ! grep -q "^done: 2 steps" "$out/log"; then
    printf '%-120s %7s GB   failed: %s\n' "$c" "$estimate" "$(grep -m1 error "$out/log")"
    continue
  fi
  printf '%-120s %7s GB %7s GB %+7.1f%%\n' "$c" "$estimate" "$measured" \
    "$(awk -v e="$estimate" -v m="$measured" 'BEGIN { print 100 * (e / m - 1) }')"
done
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
total=$(awk '/MemTotal/ { printf "%.1f GB", $2 * 1024 / 1e9 }' /proc/meminfo)
echo "machine: $(nproc) cores, $cpu, $total memory, $available GB available at the start"
