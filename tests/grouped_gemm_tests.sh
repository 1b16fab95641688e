#!/usr/bin/env bash
# The grouped GEMM's CUTLASS kernels without a GPU: with nvcc, that the build compiles them for sm_90a from
# CUTLASS's headers (and builds the per-group path alone without the headers) and that the bundle records them;
# on any machine, that the parity group and the benchmark lines that hold them to the per-group path exist and
# run on the strict CPU backend, and that gpu_check reports them. One PASS or FAIL line per case.
set -u
cd "$(dirname "$0")/.."
source tests/expect.sh
parity=./build/tests/gpu_parity
gemm=./build/bench/gemm_bench
number='[0-9.e+-]+'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect "gpu_parity --list names the CUTLASS group after grouped_gemm" 0 "^grouped_gemm grouped_cutlass$" -- bash -c \
  "$parity --list | grep -E '^grouped_' | tr '\n' ' ' | sed 's/ \$//'"
expect "gpu_parity --cpu-stand-in --only grouped_cutlass: BF16's three forms, FP8's forward (also from prepared
  weights), two shapes" 0 \
  "^group grouped_cutlass: 18 passed, 0 failed$" -- $parity --cpu-stand-in --only grouped_cutlass
expect "gemm_bench --cpu-stand-in: a grouped line per form, with the path taken and no per-group figure" 0 "^4$" -- \
  bash -c "$gemm --cpu-stand-in | grep -cE '^grouped cpu-strict (bf16|fp8) model=moe-1b/8 form=(forward|dgrad|wgrad) \
groups=4 rows=512 n=(128|256) k=(128|256) path=cpu-reference : $number TFLOP/s, per-group n/a, n/a$'"
expect "gemm_bench --cpu-stand-in: the fallback lines still close the run" 0 "^gemm fallback: none fp8 fallback: none $" \
  -- bash -c "$gemm --cpu-stand-in | tail -n 2 | tr '\n' ' '"

# gpu_check's gemm section reads the grouped lines: a PASS row with the figures, in the stand-in.
mkdir -p "$tmp/out" "$tmp/tmp"
OUT="$tmp/out" TMPDIR="$tmp/tmp" GPU_CHECK_STAND_IN=1 GPU_CHECK_SECTIONS=gemm bash scripts/gpu_check.sh > "$tmp/stdout" 2>&1
expect "gpu_check (stand-in) reports the grouped GEMM lines" 0 \
  "^gemm	grouped gemm	PASS	[0-9]+	grouped_best_tflops=$number speedup_min=n/a speedup_max=0 per_group_lines=0$" -- \
  cat "$tmp/out/summary.tsv"

if [[ -n ${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)} ]]; then
  bf16=build/src/ops/grouped_gemm/cuda_cutlass_bf16.o fp8=build/src/ops/grouped_gemm/cuda_cutlass_fp8.o
  expect "make: the CUTLASS files compile for sm_90a against the headers in .venv" 0 \
    "gencode arch=compute_90a,code=sm_90a .*-DMT_CUTLASS=1 -isystem \.venv/lib/python3[0-9.]*/site-packages/cutlass_library/source/include" \
    -- make -n -W src/ops/grouped_gemm/cuda_cutlass_bf16.cu "$bf16"
  expect "make: without CUTLASS's headers they build the per-group path alone" 0 "-DMT_CUTLASS=0 -c" -- \
    make -n -W src/ops/grouped_gemm/cuda_cutlass_bf16.cu CUTLASS_INCLUDE= "$bf16"
  # Each kernel leaves the guard of its host launch stub in the object: bf16's forward (fp32 and bf16 output),
  # Dgrad and Wgrad; FP8's forward.
  stubs() { nm "$1" | grep -cE ' b _ZGVZ.*__device_stub__ZN7cutlass13device_kernel'; }
  expect "the objects hold CUTLASS's grouped kernels: 4 bf16, 1 FP8" 0 "^4 1$" -- echo "$(stubs $bf16) $(stubs $fp8)"
  if [[ -f gpu-bundle/BUILD_INFO ]]; then
    expect "gpu-bundle/BUILD_INFO records CUTLASS" 0 "^cutlass  4\.2\.0 \(grouped GEMM kernels, bf16 and FP8, sm_90a\)$" -- \
      cat gpu-bundle/BUILD_INFO
  fi
fi
