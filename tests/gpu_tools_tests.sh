#!/usr/bin/env bash
# The GPU tools (gpu_parity, gemm_bench, attention_bench) without a GPU: their command lines, and
# their output with the strict CPU backend standing in for the GPU (--cpu-stand-in), which is what
# scripts that read a GPU machine's report parse. Every case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
parity=./build/tests/gpu_parity
gemm=./build/bench/gemm_bench
attention=./build/bench/attention_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/expect.sh

expect "gpu_parity --list names its groups, one per line" 0 "^gemm$" -- $parity --list
expect "gpu_parity --list: every group, in the order they run" 0 "^groups gemm gemm_fallback .* fp8_quantize fp8_gemm$" -- \
  bash -c "echo groups \$($parity --list | tr '\n' ' ' | sed 's/ \$//')"
expect "gpu_parity: an unknown group is named, with the valid ones" 2 \
  "gpu_parity: --only: no group named 'gemmm'; the groups are gemm, gemm_fallback, .*, fp8_gemm" -- \
  $parity --cpu-stand-in --only rope,gemmm
expect "gpu_parity: an unknown argument, with the usage" 2 "unknown argument '--fast'.*usage: gpu_parity" -- \
  bash -c "$parity --fast 2>&1 | tr '\n' ' '; exit \${PIPESTATUS[0]}"
expect "gpu_parity: --only without groups" 2 "--only needs a comma-separated list of groups" -- $parity --only
# One group, or two, alone: framed by their header and count, nothing else run, seeds their own.
expect "gpu_parity --cpu-stand-in --only runs just those groups" 0 "^rope embedding: rope [0-9]+ 0, embedding 10 0$" -- bash -c \
  "out=\$($parity --only=embedding,rope --cpu-stand-in) || exit 1
   groups=\$(grep '^group [a-z_0-9]*\$' <<<\"\$out\" | cut -d' ' -f2 | paste -sd' ')
   echo \$groups: \$(grep -E '^group [a-z_0-9]+: ' <<<\"\$out\" | sed -E 's/^group ([a-z_0-9]+): ([0-9]+) passed, ([0-9]+) failed/\1 \2 \3/' | paste -sd, | sed 's/,/, /g')"
out=$($parity --cpu-stand-in 2>&1); rc=$?
groups=$($parity --list | wc -l)
echo "$out" | sed -n '/^group rope$/,/^group rope:/p' | grep '^PASS' > "$tmp/rope_among_all"
expect "gpu_parity: a group's checks do not depend on which others run" 0 "^same$" -- bash -c \
  "[[ -s $tmp/rope_among_all && \"\$($parity --cpu-stand-in --only rope | grep '^PASS')\" == \"\$(cat $tmp/rope_among_all)\" ]] && echo same"
if ((rc == 0)) && [[ $(grep -cE '^group [a-z_0-9]+: [0-9]+ passed, 0 failed$' <<<"$out") -eq $groups ]] &&
  grep -q '^gemm fallback: none$' <<<"$out" && grep -q '^fp8 fallback: none$' <<<"$out" &&
  [[ $(tail -n 1 <<<"$out") =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; then
  echo "PASS GPU parity checks are sound: all $groups groups pass with the strict CPU backend standing in for the GPU"
else
  echo "FAIL gpu_parity --cpu-stand-in (exit $rc)"; grep -E '^FAIL|^group' <<<"$out" | tail -n 8 | sed 's/^/    /'
fi

# The benchmarks' lines, as on a GPU, from the strict CPU backend.
number='[0-9.e+-]+'
expect "gemm_bench --cpu-stand-in: a bf16 line, end to end and matmul only" 0 \
  "^gemm cpu-strict bf16 layer=expert-up form=forward m=128 n=128 k=448 : $number TFLOP/s, matmul only $number TFLOP/s$" -- \
  $gemm --cpu-stand-in
expect "gemm_bench --cpu-stand-in: an fp8 line with its scale modes and the bf16 ratio" 0 \
  "^gemm cpu-strict fp8 layer=attn-out form=wgrad m=448 n=1024 k=128 scales=cpu-emulation : $number TFLOP/s, matmul only n/a, $number""x bf16$" -- \
  $gemm --cpu-stand-in
expect "gemm_bench --cpu-stand-in: square lines and the fallback lines" 0 "^ok$" -- bash -c \
  "out=\$($gemm --cpu-stand-in) && grep -qE '^gemm cpu-strict bf16 m=128 n=128 k=128 : $number TFLOP/s, matmul only $number TFLOP/s$' <<<\"\$out\" &&
   grep -qE '^gemm cpu-strict fp32 m=128 n=128 k=128 : $number TFLOP/s$' <<<\"\$out\" &&
   [[ \$(grep -c '^gemm cpu-strict fp8 ' <<<\"\$out\") -eq 21 ]] &&
   [[ \$(tail -n 2 <<<\"\$out\" | tr '\n' ' ') == 'gemm fallback: none fp8 fallback: none ' ]] && echo ok"
expect "gemm_bench: an unknown argument" 2 "gemm_bench: unknown argument '--gpu'" -- $gemm --gpu
expect "attention_bench --cpu-stand-in: the GPU's lines" 0 \
  "^attention moetrain bf16 cpu-strict mla heads batch=1 heads=2 seq=128 qk=192 v=128: fwd\+bwd $number TFLOP/s \(fwd $number ms $number TFLOP/s, bwd $number ms $number TFLOP/s\)$" -- \
  $attention --cpu-stand-in
expect "attention_bench: an unknown argument" 2 "attention_bench: unknown argument 'x'" -- $attention x
