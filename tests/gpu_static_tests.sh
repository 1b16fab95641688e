#!/usr/bin/env bash
# What a GPU run depends on that can be checked without a GPU: the rounding of a kernel that shares its
# math with the CPU reference (in its PTX), and scripts/gpu_check.sh's calls as docs/gpu_check.md gives
# them, each within the deadline. One PASS, FAIL or SKIP line per case.
set -u
cd "$(dirname "$0")/.."
source tests/expect.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# RoPE's x0 * c - x1 * s: nvcc fuses a product with the add after it (fma) unless the product is rounded
# alone (mul.rn); the host build never fuses, and the fused result differed by many bfloat16 ulps near zero.
# In PTX, fma.rn.f32 is a fused product and a plain mul.f32 one that ptxas may still fuse.
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if [[ -n $nvcc ]]; then
  "$nvcc" -O3 -std=c++20 -arch=compute_90 -Isrc -ptx src/ops/rope/cuda.cu -o "$tmp/rope.ptx" 2> "$tmp/nvcc.err"
  count() { grep -c "$1" "$tmp/rope.ptx"; }
  expect "rope's kernels round each product alone, as the CPU does (no fused or fusable float product)" 0 \
    "^fused 0, fusable 0, rounded alone [1-9][0-9]*$" -- \
    echo "fused $(count 'fma\.rn\.f32'), fusable $(count 'mul\.f32'), rounded alone $(count 'mul\.rn\.f32')"
else
  echo "SKIP rope's kernels round each product alone: no nvcc"
fi

# The calls docs/gpu_check.md gives for a machine lent 600 s a command: each fits the deadline, and together
# they run every section.
mapfile -t calls < <(grep -oE '^GPU_CHECK_SECTIONS=[a-z0-9,]+ bash scripts/gpu_check\.sh$' docs/gpu_check.md)
expect "docs/gpu_check.md gives the check as two calls" 0 "^2$" -- echo "${#calls[@]}"
covered=()
for call in "${calls[@]}"; do
  sections=${call%% *}
  sections=${sections#GPU_CHECK_SECTIONS=}
  covered+=(${sections//,/ })
  expect "the documented call of $sections fits the deadline" 0 "estimated at [0-9]+ s of 540 s$" -- \
    env GPU_CHECK_PLAN=1 GPU_CHECK_SECTIONS="$sections" timeout 20 bash scripts/gpu_check.sh
done
all=$(GPU_CHECK_PLAN=1 timeout 20 bash scripts/gpu_check.sh 2> /dev/null | sed -E 's/^gpu_check: (.*) estimated.*/\1/')
expect "the documented calls run every section" 0 "^$(tr ' ' '\n' <<<"$all" | sort -u | tr '\n' ' ')$" -- \
  bash -c 'printf "%s\n" "$@" | sort -u | tr "\n" " "' _ "${covered[@]}"
expect "the whole check in one call does not fit: said, with where the two calls are" 1 \
  "estimated at [0-9]+ s, more than the 540 s deadline: .*two calls \(docs/gpu_check.md\)" -- \
  env GPU_CHECK_PLAN=1 timeout 20 bash scripts/gpu_check.sh
