#!/usr/bin/env bash
# moetrain against the PyTorch reference model on CPU: same config, same batch size, same
# thread count, one run. Prints both throughputs and their ratio.
#   bash bench/vs_pytorch.sh [EXPERIMENT.toml] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
exp=${1:-configs/tiny.toml}
steps=${2:-30}
threads=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ours=$(OPENBLAS_NUM_THREADS=$threads bash bench/cpu_tokens_per_sec.sh "$exp" "$steps" | sed -n 1p)
echo "moetrain: $ours"
./moetrain dump-step "$exp" --out "$tmp/step.h5" >/dev/null
theirs=$(.venv/bin/python bench/torch_train.py "$tmp/step.h5" "$steps" "$threads")
echo "$theirs"
a=$(sed -E 's/.*median ([0-9]+) tokens.*/\1/' <<<"$ours")
b=$(sed -E 's/.*median ([0-9]+) tokens.*/\1/' <<<"$theirs")
awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio moetrain / pytorch: %.2f\n", a / b }'
echo "machine: $threads cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
