#!/usr/bin/env bash
# scripts/gpu_check.sh proven without a GPU: its stand-in (the strict CPU backend in cuda's place, the build's
# binaries, small models) runs every section, so every command line, parser, budget and file of the script runs.
# Then one check's command is made to fail: its result is FAIL with the command's last lines on stdout, and every
# other check keeps its result. One PASS or FAIL line per property.
set -u
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS gpu_check stand-in: $*"; }
fail() { echo "FAIL gpu_check stand-in: $*"; }
# expect WHAT COMMAND...: PASS when COMMAND succeeds.
expect() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

# stand_in NAME [VAR=VALUE...]: one run of the check into $tmp/NAME/out, its scratch space in $tmp/NAME/tmp, with
# .venv's Python unless VAR=VALUE names another.
stand_in() {
  local name=$1; shift
  mkdir -p "$tmp/$name/out" "$tmp/$name/tmp"
  env OUT="$tmp/$name/out" TMPDIR="$tmp/$name/tmp" GPU_CHECK_STAND_IN=1 PYTHON="$python" "$@" \
    bash scripts/gpu_check.sh > "$tmp/$name/stdout" 2>&1
}
rows() { awk -F'\t' -v s="$2" 'NR > 1 && $3 == s' "$tmp/$1/out/summary.tsv"; }

stand_in all
rc=$?
out=$tmp/all/out
sections=(preflight parity gemm smoke gpt2 moe1b dsv3 nccl oracle layouts fit)
expect "exits 0 with no FAIL (exit $rc; $(rows all FAIL | cut -f1,2 | tr '\t\n' ': '))" test "$rc" = 0 -a -z "$(rows all FAIL)"
for s in "${sections[@]}"; do
  expect "section $s reached and passed ($(awk -F'\t' -v s="$s" '$1 == s { print $2 ": " $3 }' "$out/summary.tsv" |
    tr '\n' ';' | cut -c1-150))" test -n "$(rows all PASS | awk -F'\t' -v s="$s" '$1 == s')"
done
# Every row: five tab-separated fields, a known status, whole seconds, figures as key=value words.
expect "summary.tsv: every row has a section, a check, PASS/FAIL/SKIP, seconds and key=value figures" \
  awk -F'\t' 'NR == 1 { ok = $0 == "section\tcheck\tstatus\tseconds\tfigures"; next }
    NF != 5 || $3 !~ /^(PASS|FAIL|SKIP)$/ || $4 !~ /^[0-9]+$/ { ok = 0 }
    { n = split($5, w, " "); for (i = 1; i <= n; i++) if (w[i] !~ /^[a-z0-9_]+=[^=]+$/) ok = 0 }
    END { exit !(ok && NR > 30) }' "$out/summary.tsv"
# The CPU backends have one way to run each GEMM: every fallback row must say that none fell back.
expect "every fallback row of the stand-in counts none ($(awk -F'\t' '$2 ~ /fallbacks$/ { print $1 ": " $5 }' \
  "$out/summary.tsv" | tr '\n' ';'))" \
  test "$(awk -F'\t' '$2 ~ /fallbacks$/ && $5 != "fallbacks=0"' "$out/summary.tsv" | wc -l)" = 0 -a \
       "$(awk -F'\t' '$2 ~ /fallbacks$/' "$out/summary.tsv" | wc -l)" = 3
expect "the parity section runs each group of gpu_parity --list in a process of its own" \
  test "$(awk -F'\t' '$1 == "parity" && $2 != "fallbacks"' "$out/summary.tsv" | wc -l)" = \
       "$(./build/tests/gpu_parity --list | wc -l)"
size=$(stat -c %s "$out/logs.tgz" 2>/dev/null || echo 0)
expect "logs.tgz holds every command's output, within 15 MiB ($size bytes)" \
  test "$size" -gt 0 -a "$size" -le $((15 * 1024 * 1024)) -a "$(tar tzf "$out/logs.tgz" | grep -c '\.log$')" -gt 30
expect "logs.tgz holds no checkpoint or dump" test -z "$(tar tzf "$out/logs.tgz" | grep -E 'ckpt|rank_[0-9]+\.h5|start_')"
expect "env.txt and gpu_report.txt are written" test -s "$out/env.txt" -a -s "$out/gpu_report.txt"
expect "the report gives each section's estimate and spent seconds" \
  test "$(grep -cE '^== [a-z0-9]+: [0-9]+ s spent of [0-9]+ estimated' "$out/gpu_report.txt")" = "${#sections[@]}"
expect "nothing is left on disk: the scratch folder is empty, the output folder holds the four files" \
  test -z "$(ls -A "$tmp/all/tmp")" -a "$(ls "$out" | tr '\n' ' ')" = "env.txt gpu_report.txt logs.tgz summary.tsv "

# A failing command in one section: its check fails and shows its last lines; the others keep their results.
stand_in broken GPU_CHECK_BREAK=gemm_bench GPU_CHECK_SECTIONS=gemm,gpt2
rc=$?
expect "a broken gemm_bench: the check exits non-zero (exit $rc)" test "$rc" -ne 0
expect "a broken gemm_bench: its row is the only FAIL" test "$(rows broken FAIL | cut -f2)" = gemm_bench
expect "a broken gemm_bench: its last 8 lines are on stdout" \
  grep -q '| deliberate failure, line 10' "$tmp/broken/stdout"
expect "a broken gemm_bench: attention_bench in its section and the gpt2 section still pass" \
  test -n "$(rows broken PASS | awk -F'\t' '$2 == "attention_bench"')" -a -n "$(rows broken PASS | awk -F'\t' '$1 == "gpt2"')"
expect "a broken gemm_bench: nothing is left on disk" test -z "$(ls -A "$tmp/broken/tmp")"

# A Python with none of torch, numpy and h5py (a bare virtual environment): each missing module is a SKIP that
# says what does without it, and the loss comparisons still pass, read from moetrain's step lines.
python3 -m venv --without-pip "$tmp/bare"
stand_in bare PYTHON="$tmp/bare/bin/python" GPU_CHECK_SECTIONS=preflight,smoke
expect "no torch, numpy or h5py: each is a SKIP naming its fallback" \
  test "$(rows bare SKIP | awk -F'\t' '$2 ~ /^python (torch|numpy|h5py)$/' | wc -l)" = 3
expect "no h5py: smoke's comparisons pass on the step lines" \
  test "$(rows bare PASS | awk -F'\t' '$1 == "smoke"' | wc -l)" = 4 -a -z "$(rows bare FAIL)"
expect "no h5py: the comparisons say where their losses came from" grep -q 'step lines, 4 decimals' "$tmp/bare/stdout"

# The deadline: sections it leaves no time for are SKIP "not reached", and the report still ends with its summary.
stand_in late GPU_CHECK_SECONDS=1 GPU_CHECK_SECTIONS=gpt2,fit
expect "past the deadline: gpt2 and fit are reported as not reached, nothing fails" \
  test "$(rows late SKIP | awk -F'\t' '$1 == "gpt2" || $1 == "fit"' | wc -l)" = 2 -a -z "$(rows late FAIL)" -a \
       "$(grep -ac "not reached: the check's time is up" "$tmp/late/stdout")" -ge 2
expect "past the deadline: the summary is printed" grep -aq '^== summary' "$tmp/late/stdout"
