#!/usr/bin/env bash
# moetrain's check on a GPU machine, run from the repository root with gpu-bundle/ (make gpu-bundle) in it:
#   bash scripts/gpu_check.sh
# Builds nothing. Runs the sections below in this order, the most useful first, each within a time budget of its
# own (its estimate plus what earlier sections left unused; a command's limit is the least of its own, the
# section's and the whole check's, GPU_CHECK_SECONDS, default 540, under the GPU machine's 10 minutes a command):
#   preflight  the GPU (name, clocks, power limit, throttle reasons, MIG), Python modules, the CUDA libraries
#              the binaries resolve, free disk, compute-sanitizer
#   parity     gpu_parity, one process per group of ops, CUDA against the CPU reference; a group that crashes
#              is run again under compute-sanitizer's memcheck (at most 60 s)
#   gemm       gemm_bench (bf16 and FP8: the scale mode used, matmul-only and with-quantization TFLOP/s; the
#              experts' grouped GEMMs on CUTLASS against the per-group loop),
#              attention_bench beside PyTorch's scaled_dot_product_attention
#   smoke      configs/deepseek-v3-small.toml on cuda and on cpu, every step's loss within 1e-3 relative;
#              greedy samples on both; runs stopped half way on one device and resumed on the other
#   gpt2       a dense model of GPT-2 124M's shape: tokens/s and MFU, beside PyTorch eager on the same model, with
#              and without training.cuda_graph; the device counters of a step
#   moe1b      configs/moe-1b.toml: bf16 tokens/s beside PyTorch, with and without training.cuda_graph, where a
#              step's time goes and its device counters (--profile), FP8
#   dsv3       DeepSeek-V3's layer shapes (bench/dsv3-layers.toml); PyTorch beside it when time is left
#   nccl       nccl_test (every NcclComm call on one rank), smoke's cuda run again over NCCL
#   oracle     the PyTorch oracle's configurations with moetrain's step on cuda
#   layouts    tests/mpi/run_mpi_tests.sh's layout matrix, every rank on this GPU (payloads staged)
#   fit        the largest micro-batch of moe-1b per recomputation mode, beside the planner's
# Only "no GPU" stops the sections after preflight; every other failure is its own check's.
# What comes back, under $OUT (default ./gpu-out):
#   gpu_report.txt  every command with the end of its output, every result, the time of each section
#   summary.tsv     one row per check, written as it ends: section, check, PASS/FAIL/SKIP, seconds, figures
#   logs.tgz        every command's whole output, small log.h5 files, benchmark and profile tables (at most
#                   15 MiB; no checkpoints or dumps), refreshed after each section
#   env.txt         the machine, drivers, libraries, Python modules and environment
# On stdout: each result as it ends, each FAIL with its command's last 8 lines, and the summary.
# GPU_CHECK_SECTIONS=parity,nccl picks sections; all of them do not fit one call of 600 s, docs/gpu_check.md gives
# the two calls. GPU_CHECK_PLAN=1 only says whether the chosen sections' estimates fit the deadline (exit 1: not).
# GPU_CHECK_STAND_IN=1 runs every section on a machine without a
# GPU: the strict CPU backend in cuda's place, the build's binaries (build/, ./moetrain) in the bundle's, and
# small models, so that every command line, parser and file of this script is exercised (tests/gpu_check_tests.sh).
# GPU_CHECK_BREAK=CHECK makes that one check's command fail (for that test).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$SECONDS
stand_in=${GPU_CHECK_STAND_IN:-0}
# The stand-in proves the harness, not the GPU's speed: on a busy 2-core machine its budgets are five times the
# GPU's, so that they bound a hang without cutting a slow run short.
stretch=$((stand_in ? 5 : 1))
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-$((540 * stretch))}))
# The order, and each section's estimate in seconds (the budgets): what the first run on an H200 spent (gemm 80,
# dsv3 54, oracle 120, layouts 96), with a margin; the others' as first guessed, above what that run spent.
order=(preflight parity gemm smoke gpt2 moe1b dsv3 nccl oracle layouts fit)
declare -A estimate=([preflight]=20 [parity]=80 [gemm]=90 [smoke]=60 [gpt2]=45 [moe1b]=130 [dsv3]=60 [nccl]=30
                     [oracle]=130 [layouts]=120 [fit]=180)
selected=${GPU_CHECK_SECTIONS:-${order[*]}}
selected=" ${selected//,/ } "
planned=0
for s in $selected; do
  [[ -n ${estimate[$s]:-} ]] ||
    { echo "gpu_check: unknown section '$s' in GPU_CHECK_SECTIONS; the sections are: ${order[*]}" >&2; exit 2; }
  planned=$((planned + estimate[$s]))
done
# More than the deadline holds cuts the last sections short: docs/gpu_check.md splits the check over two calls.
# GPU_CHECK_PLAN=1 says only this, and exits 1 when the sections do not fit.
fits=$((planned <= ${GPU_CHECK_SECONDS:-540}))
((fits)) || echo "gpu_check: the sections chosen are estimated at $planned s, more than the" \
  "${GPU_CHECK_SECONDS:-540} s deadline: the last ones will not be reached; run them in two calls (docs/gpu_check.md)" >&2
if [[ ${GPU_CHECK_PLAN:-0} == 1 ]]; then
  echo "gpu_check:" $selected "estimated at $planned s of ${GPU_CHECK_SECONDS:-540} s"
  exit $((!fits))
fi
OUT=${OUT:-$repo/gpu-out}
mkdir -p "$OUT"
report=$OUT/gpu_report.txt summary=$OUT/summary.tsv envfile=$OUT/env.txt
: > "$report"
printf 'section\tcheck\tstatus\tseconds\tfigures\n' > "$summary"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
logs=$work/logs runs=$work/runs
# PyTorch's and Triton's caches go with the rest, so that nothing stays behind.
export TORCHINDUCTOR_CACHE_DIR=$work/torch_cache TRITON_CACHE_DIR=$work/triton_cache
mkdir -p "$logs" "$runs"
python=${PYTHON:-python3}
logs_cap=$((15 * 1024 * 1024))


if ((stand_in)); then
  device=cpu-strict
  bin_args=(--cpu-stand-in)
  mt_bin=${MOETRAIN:-$repo/moetrain}
  parity_bin=$repo/build/tests/gpu_parity nccl_bin=$repo/build/tests/nccl_test
  gemm_bin=$repo/build/bench/gemm_bench attention_bin=$repo/build/bench/attention_bench
  mpirun_bin=${MPIRUN:-mpirun}
else
  device=cuda
  bin_args=()
  bundle=$repo/gpu-bundle
  mt_bin=$bundle/moetrain
  parity_bin=$bundle/gpu_parity nccl_bin=$bundle/nccl_test gemm_bin=$bundle/gemm_bench attention_bin=$bundle/attention_bench
  mpirun_bin=$bundle/mpi/mpirun
fi

# ---- reporting ---------------------------------------------------------------------------------------------
say() { echo "$*" >> "$report"; }
note() { echo "$*" | tee -a "$report"; }
section=preflight check_mark=$SECONDS failures=0
# result CHECK STATUS TEXT [FIGURES]: one check's outcome, in the report, summary.tsv and on stdout. FIGURES are
# key=value words. A FAIL also shows the last 8 lines of the command that failed.
result() {
  local check=$1 status=$2 text=$3 figures=${4:-}
  local seconds=$((SECONDS - check_mark))
  check_mark=$SECONDS
  # A check whose command the budget left unstarted was not reached, not failed.
  if [[ $status == FAIL && $last_rc == 125 ]]; then status=SKIP text="not reached: the section's time is up"; fi
  note "[$section] $check: $status${text:+ ($text)}"
  printf '%s\t%s\t%s\t%s\t%s\n' "$section" "$check" "$status" "$seconds" "$figures" >> "$summary"
  results+=("[$section] $check: $status${text:+ ($text)}")
  if [[ $status == FAIL ]]; then
    failures=$((failures + 1))
    [[ -s $work/last ]] && tail -n 8 "$work/last" | sed 's/^/    | /' | tee -a "$report"
  fi
}
results=()

# ---- running commands --------------------------------------------------------------------------------------
# limited LABEL SECONDS CMD...: runs CMD, stopping it after SECONDS or at the end of the section's budget or of
# the whole check, whichever comes first. Its whole output goes to logs/<section>/<n>-LABEL.log and to
# $work/last; the report gets the command and the output's last 40 lines. Returns CMD's status (124 when
# stopped, 125 when not started for lack of time).
command_number=0 last_rc=0
limited() {
  local label=$1 want=$2 left rc log
  shift 2
  left=$(( (section_end < deadline ? section_end : deadline) - SECONDS ))
  mkdir -p "$logs/$section"
  log=$logs/$section/$((++command_number))-$label.log
  if ((left < 3)); then
    echo "not run: the section's time is up" | tee "$work/last" > "$log"; say "    (not run: the section's time is up)"
    last_rc=125
    return 125
  fi
  want=$((want * stretch))
  ((want > left)) && want=$left
  say "\$ ${*#"$repo/"}"
  if [[ ${GPU_CHECK_BREAK:-} == "$label" ]]; then  # the deliberate failure of tests/gpu_check_tests.sh
    set -- bash -c 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "deliberate failure, line $i"; done; exit 3'
  fi
  timeout --kill-after=5 "$want" "$@" > "$log" 2>&1
  rc=$?
  ((rc == 124 || rc == 137)) && { echo "stopped after $want s" >> "$log"; rc=124; }
  last_rc=$rc
  cp "$log" "$work/last"
  local lines
  lines=$(wc -l < "$log")
  ((lines > 40)) && say "    ($lines lines; the whole output is in logs.tgz: ${log#"$logs/"})"
  tail -n 40 "$log" | sed 's/^/    /' >> "$report"
  return $rc
}
last_line() { grep -av '^\s*$' "$work/last" | tail -n 1 | cut -c1-200; }
# keep_log NAME: a run's log.h5 into logs.tgz, when small (per-step figures, expert load, phase timings).
keep_log() {
  local f=$runs/$1/log.h5
  [[ -f $f ]] && (($(stat -c %s "$f") < 4 * 1024 * 1024)) && mkdir -p "$logs/$section" && cp "$f" "$logs/$section/$1.log.h5"
}

# pack: logs.tgz of everything in logs/, at most logs_cap bytes: without HDF5 files, then with each log cut to
# its last 2000 lines, if it must.
pack() {
  tar czf "$OUT/logs.tgz" -C "$logs" . 2>/dev/null
  (($(stat -c %s "$OUT/logs.tgz") <= logs_cap)) && return
  tar czf "$OUT/logs.tgz" --exclude='*.h5' -C "$logs" . 2>/dev/null
  (($(stat -c %s "$OUT/logs.tgz") <= logs_cap)) && return
  local f
  find "$logs" -name '*.log' -size +1M | while read -r f; do tail -n 2000 "$f" > "$f.cut" && mv "$f.cut" "$f"; done
  tar czf "$OUT/logs.tgz" --exclude='*.h5' -C "$logs" . 2>/dev/null
}
disk_free() { df -h --output=avail "$work" | tail -n 1 | tr -d ' '; }

# ---- moetrain --------------------------------------------------------------------------------------------
# Token shards from the repository's own text (a GPU machine has no fortunes corpus), made once.
shards() {
  [[ -s $work/data/train_000000.bin ]] && return 0
  local inputs=() d
  for d in $(find src -type f -printf '%h\n' | sort -u); do inputs+=(--input "$d"); done
  limited prepare 60 "${mt[@]}" prepare "${inputs[@]}" --out "$work/data"
}
# need_shards: the shards, or a FAIL result saying why there are none (the section then stops).
need_shards() { shards || { result "token shards" FAIL "moetrain prepare: $(last_line)"; return 1; }; }
data_sets=(--set data.train="$work/data/train_000000.bin" --set data.val="$work/data/val_000000.bin")
# Every run of the check: no final checkpoint, no evaluation, a report line every step, a fresh start.
bench_sets=(--set checkpoint.every=0 --set checkpoint.final=false --set checkpoint.resume=never
            --set training.eval_every=0 --set log.every=1 --set run.out_dir="$runs")
# In the stand-in every speed run trains configs/tiny.toml (its real config is checked with --dry-run).
speed_config() { ((stand_in)) && echo configs/tiny.toml || echo "$1"; }

# step_figures LOG SKIP: "TOKENS_PER_S MFU" medians over the step lines after the first SKIP steps.
step_figures() {
  awk -v skip="$2" '/^step +[0-9]+\/[0-9]+ \|/ {
      split($2, s, "/"); if (s[1] + 0 <= skip) next
      n++; for (i = 1; i <= NF; i++) { if ($i == "tok/s") t[n] = $(i - 1); if ($i == "MFU") m[n] = $(i + 1) } }
    function median(a,   k, j, v, c) { c = 0; for (k in a) v[++c] = a[k] + 0
      for (k = 2; k <= c; k++) for (j = k; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
      return c ? (c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2) : -1 }
    END { if (n == 0) { print "none none"; exit } ; mfu = median(m); printf "%d %s\n", median(t), (mfu < 0 || m[1] == "n/a") ? "n/a" : sprintf("%.1f%%", mfu) }' "$1"
}
# step_losses LOG: "STEP LOSS" per step line.
step_losses() { awk '/^step +[0-9]+\/[0-9]+ \|/ { split($2, s, "/"); print s[1], $5 }' "$1"; }
# compare_losses TOL REF_LOG RUN_LOG: every step's loss of RUN against REF's, from log.h5 when h5py is here,
# else from the step lines (4 decimals). Prints the largest relative difference; fails beyond TOL.
compare_losses() {
  local tol=$1 ref=$2 run=$3
  if ((have_h5py)) && [[ -f ${ref%.out}/log.h5 && -f ${run%.out}/log.h5 ]]; then
    "$python" - "$tol" "${ref%.out}/log.h5" "${run%.out}/log.h5" <<'PY'
import sys
import h5py
tol, ref_path, run_path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
def losses(path):
    with h5py.File(path, "r") as f:
        return dict(zip(f["step"][()].tolist(), f["loss"][()].tolist()))
ref, run = losses(ref_path), losses(run_path)
if sorted(run) != sorted(ref):
    sys.exit(f"steps {min(run, default=0)}..{max(run, default=0)} logged, the reference has {min(ref)}..{max(ref)}")
rel = {s: abs(run[s] - ref[s]) / abs(ref[s]) for s in ref}
worst = max(rel, key=rel.get)
print(f"max relative difference {rel[worst]:.2e} at step {worst} ({run[worst]:.6f} against {ref[worst]:.6f})")
sys.exit(0 if rel[worst] <= tol else 1)
PY
  else
    awk -v tol="$tol" 'NR == FNR { ref[$1] = $2; n_ref++; next }
      ($1 in ref) { d = ref[$1] - $2; d = d < 0 ? -d : d; r = ref[$1] != 0 ? d / (ref[$1] < 0 ? -ref[$1] : ref[$1]) : d; n++
        if (r >= worst) { worst = r; at = $1; a = $2; b = ref[$1] } }
      END { if (n == 0 || n != n_ref) { print "the runs logged different steps (" n " of " n_ref ")"; exit 1 }
            printf "max relative difference %.2e at step %d (%s against %s; step lines, 4 decimals)\n", worst, at, a, b
            exit worst <= tol ? 0 : 1 }' <(step_losses "$ref") <(step_losses "$run")
  fi
}
# same_losses CHECK TOL REF_LOG RUN_LOG [SAID] [FIGURES]: compare_losses as CHECK's result, PASS with SAID before
# the comparison's line, else FAIL with it.
same_losses() {
  if compare_losses "$2" "$3" "$4" > "$work/cmp" 2>&1; then result "$1" PASS "${5:-}$(cat "$work/cmp")" "${6:-}"
  else cp "$work/cmp" "$work/last"; result "$1" FAIL "$(last_line)"; fi
}
# train LABEL SECONDS CONFIG NAME DEVICE [ARGS...]: a run whose output is kept in $runs/NAME.out.
train() {
  local label=$1 seconds=$2 cfg=$3 name=$4 dev=$5
  shift 5
  limited "$label" "$seconds" "${mt[@]}" train "$cfg" "${data_sets[@]}" "${bench_sets[@]}" --set run.name="$name" \
    --set precision.device="$dev" "$@"
  local rc=$?
  cp "$work/last" "$runs/$name.out"
  return $rc
}
# forget NAME...: a run's folder and output, once measured (a 1B model's run folder holds gigabytes).
forget() { local n; for n in "$@"; do rm -rf "${runs:?}/$n" "$runs/$n.out"; done; }

# speed LABEL CONFIG STEPS [ARGS...]: moetrain's median tokens/s and MFU on the device, bf16 GEMMs unless ARGS say
# otherwise; sets $speed_tps and $speed_mfu ("" when the run failed).
speed() {
  local label=$1 cfg=$2 steps=$3
  shift 3
  speed_tps="" speed_mfu=""
  local name=speed_$label
  if train "$label" 200 "$(speed_config "$cfg")" "$name" "$device" --set training.steps="$steps" \
      --set precision.matmul=bf16 "$@"; then
    read -r speed_tps speed_mfu <<<"$(step_figures "$runs/$name.out" 2)"
    [[ $speed_tps == none ]] && speed_tps=""
    keep_log "$name"
  fi
  forget "$name"
  [[ -n $speed_tps ]]
}
# pytorch LABEL CONFIG: PyTorch eager (bf16 autocast) trained on moetrain's model and first batch, median tokens/s;
# sets $torch_tps, or $torch_why when it could not run.
pytorch() {
  local label=$1 cfg=$2
  torch_tps="" torch_why=""
  if ((!have_torch || !have_h5py)); then torch_why="needs torch and h5py in $python"; return 1; fi
  local dump=$work/start_$label.h5 torch_device=cuda
  ((stand_in)) && torch_device=cpu
  if ! limited "dump_$label" 120 "${mt[@]}" dump-step "$(speed_config "$cfg")" --start-only --out "$dump" "${data_sets[@]}"; then
    torch_why="dump-step: $(last_line)"
  elif ! limited "torch_$label" 200 "$python" bench/torch_train.py "$dump" 10 "$(nproc)" "$torch_device" bf16; then
    torch_why="bench/torch_train.py: $(last_line)"
  else
    torch_tps=$(sed -En 's/.*median ([0-9]+) tokens.*/\1/p' "$work/last")
    [[ -n $torch_tps ]] || torch_why="no median in its output"
  fi
  rm -f "$dump"
  [[ -n $torch_tps ]]
}
# real_config_valid LABEL CONFIG CHECK: in the stand-in, which trains configs/tiny.toml in CONFIG's place, CONFIG
# with the check's settings must pass --dry-run (else a FAIL result for CHECK); on a GPU nothing to do.
real_config_valid() {
  ((stand_in)) || return 0
  limited "dry_$1" 60 "${mt[@]}" train "$2" "${data_sets[@]}" "${bench_sets[@]}" --set precision.device="$device" \
    --set precision.matmul=bf16 --dry-run && return 0
  result "$3" FAIL "its config does not pass --dry-run: $(last_line)"
  return 1
}
# versus LABEL CONFIG STEPS: the speed check with PyTorch beside it.
versus() {
  local label=$1 cfg=$2 steps=$3 check="tokens/s $(basename "$2" .toml)"
  real_config_valid "$label" "$cfg" "$check" || return
  if ! speed "$label" "$cfg" "$steps"; then
    result "$check" FAIL "the moetrain run: $(last_line)"; return
  fi
  local ours="tokens_per_s=$speed_tps mfu=$speed_mfu"
  if pytorch "$label" "$cfg"; then
    local ratio
    ratio=$(awk -v a="$speed_tps" -v b="$torch_tps" 'BEGIN { printf "%.2f", a / b }')
    result "$check" PASS "moetrain $speed_tps tok/s (MFU $speed_mfu), PyTorch eager bf16 $torch_tps tok/s, ratio $ratio" \
      "$ours torch_tokens_per_s=$torch_tps ratio=$ratio"
  else
    result "$check" PASS "moetrain $speed_tps tok/s (MFU $speed_mfu); PyTorch: $torch_why" "$ours"
  fi
}
# counter_result CHECK: the device counters of the last command's --profile table, per step after the first: op
# launches, downloads, host syncs and allocations in the step, and those inside it before its scalars are read.
counter_result() {
  if ! grep -aq '^counters ' "$work/last"; then result "$1" FAIL "no counters table: $(last_line)"; return; fi
  local figures
  figures=$(awk '/^counters / { on = 1; next } on && /^  [a-z]/ {
      name = $0; sub(/( +[0-9.]+)+$/, "", name); sub(/^ +/, "", name); gsub(/[ :]+/, "_", name); v[name] = $NF }
    END { printf "op_launches=%s downloads=%s syncs=%s allocations=%s in_step_downloads=%s in_step_syncs=%s " \
            "in_step_allocations=%s", v["all_launches"], v["downloads"], v["host_syncs"], v["allocations"],
            v["inside_the_step_downloads"], v["inside_the_step_host_syncs"], v["inside_the_step_allocations"] }' \
    "$work/last")
  result "$1" PASS "per step after the first: ${figures// /, }" "$figures"
}
# counters LABEL CONFIG: a short --profile run for counter_result.
counters() {
  local name=counters_$1 check="counters $(basename "$2" .toml)"
  if train "$name" 150 "$(speed_config "$2")" "$name" "$device" --profile --set training.steps=3 \
      --set precision.matmul=bf16; then
    counter_result "$check"
  else
    result "$check" FAIL "$(last_line)"
  fi
  forget "$name"
}
# graph_speed LABEL CONFIG STEPS: tokens/s with training.cuda_graph = true beside $speed_tps (the run without).
graph_speed() {
  local label=$1 cfg=$2 steps=$3 without=$speed_tps check="cuda graph $(basename "$2" .toml)"
  if ((stand_in)); then result "$check" SKIP "stand-in: training.cuda_graph is cuda only"; return; fi
  if speed "${label}_graph" "$cfg" "$steps" --set training.cuda_graph=true; then
    local ratio=n/a
    [[ -n $without ]] && ratio=$(awk -v a="$speed_tps" -v b="$without" 'BEGIN { printf "%.2f", a / b }')
    result "$check" PASS "with graphs $speed_tps tok/s (MFU $speed_mfu), without ${without:-failed}, ratio $ratio" \
      "graph_tokens_per_s=$speed_tps graph_mfu=$speed_mfu tokens_per_s=${without:-none} ratio=$ratio"
  else
    result "$check" FAIL "the run with training.cuda_graph = true: $(last_line)"
  fi
  speed_tps=$without
}
# fallback_lines: the last command's "gemm fallback:" and "fp8 fallback:" lines that counted something.
fallback_lines() { grep -aE '^(gemm|fp8) fallback:' "$work/last" | grep -av ': none$'; }
# fallbacks CHECK [FILE]: the GEMMs that ran another way than asked (cuBLASLt without an algorithm, FP8 over fp32)
# as a result line: the last command's fallback lines, or FILE's lines (fallback lines gathered from several).
fallbacks() {
  local lines
  if [[ -n ${2:-} ]]; then lines=$(cat "$2"); else lines=$(fallback_lines); fi
  if [[ -n $lines ]]; then result "$1" PASS "$(tr '\n' ';' <<<"$lines")" "fallback_lines=$(wc -l <<<"$lines")"
  else result "$1" PASS "none: every GEMM ran as asked" "fallbacks=0"; fi
}

# ---- sections ----------------------------------------------------------------------------------------------
no_gpu=""
have_torch=0 have_h5py=0 sanitizer="" nccl_note=""

section_preflight() {
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -srm); $(ldd --version 2>&1 | head -n 1); $(nproc) cores; $(free -g | awk '/^Mem/ { print $2 " GiB" }')"
    echo "stand-in: $stand_in"
    [[ -f ${bundle:-/nonexistent}/BUILD_INFO ]] && { echo "== bundle"; cat "$bundle/BUILD_INFO"; }
    echo "== nvidia-smi"; timeout 20 nvidia-smi 2>&1
    echo "== nvidia-smi -q (clocks, power, throttling)"; timeout 20 nvidia-smi -q -d CLOCK,POWER,PERFORMANCE 2>&1 | head -n 120
    echo "== environment"; env | grep -E '^(CUDA|NCCL|LD_LIBRARY_PATH|PATH|OMP|MOETRAIN)' | sort
    echo "== disk"; df -h "$work" "$OUT"
  } > "$envfile" 2>&1

  # The GPU: name, clocks, power limit, throttle reasons and MIG mode.
  if ((stand_in)); then
    result gpu PASS "stand-in: the strict CPU backend in cuda's place" "device=cpu-strict"
  elif ! timeout 20 nvidia-smi -L > "$work/last" 2>&1 || ! grep -aq '^GPU' "$work/last"; then
    no_gpu="no GPU: nvidia-smi lists none"
    result gpu SKIP "$no_gpu"
  else
    local q fields=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,mig.mode.current
    q=$(timeout 20 nvidia-smi --query-gpu=$fields --format=csv,noheader 2>&1 | head -n 1)
    local why
    why=$(timeout 20 nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader 2>/dev/null ||
          timeout 20 nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv,noheader 2>&1)
    IFS=, read -r name driver memory sm sm_max mem_clock power mig <<<"$q"
    result gpu PASS "$q; throttle reasons ${why:-unknown}" \
      "name=${name// /_} driver=${driver// /} sm_mhz=${sm// MHz/} sm_max_mhz=${sm_max// MHz/} power_w=${power// W/} mig=${mig// /} throttle=${why// /}"
  fi

  # Python modules: each missing one says what does without it.
  local mod version
  local -A fallback=([torch]="the PyTorch baselines, SDPA and the oracle are skipped"
    [numpy]="the PyTorch baselines and the oracle are skipped" [h5py]="losses are read from moetrain's step lines; the PyTorch baselines and the oracle are skipped"
    [tomllib]="the PyTorch baselines and the oracle are skipped (Python 3.11 or newer has it)")
  for mod in torch numpy h5py tomllib; do
    version=${python_modules[$mod]:-}
    if [[ -n $version ]]; then
      result "python $mod" PASS "$version" "version=$version"
    else
      result "python $mod" SKIP "missing from $python: ${fallback[$mod]}"
    fi
  done
  echo "== python: $("$python" --version 2>&1) at $(command -v "$python")" >> "$envfile"

  # The libraries the binaries resolve.
  local lib path
  for lib in libcublasLt.so.13 libnccl.so.2 libcudnn.so.9 libcudart.so.13; do
    path=$(library_path "$lib")
    if [[ -n $path ]]; then result "library $lib" PASS "$path" "path=$path"
    elif ((stand_in)); then result "library $lib" SKIP "not found; the stand-in needs none"
    elif [[ $lib == libcublasLt* ]]; then result "library $lib" FAIL "not found: the CUDA binaries cannot start; set CUDA_HOME"
    elif [[ $lib == libnccl* ]]; then result "library $lib" SKIP "not found: the nccl section will skip (pip package nvidia-nccl-cu13)"
    elif [[ $lib == libcudnn* ]]; then
      result "library $lib" SKIP "not found: attention runs on the own kernels (pip package nvidia-cudnn-cu13)"
    else result "library $lib" SKIP "not found: cudnn-frontend opens it for cuDNN's attention, else the own kernels"; fi
  done
  { echo "== ldd"; ldd "$mt_bin" "$parity_bin" 2>&1; } >> "$envfile"
  if ! limited start 30 "${mt[@]}" keys; then
    result "moetrain starts" FAIL "$(last_line)"
  else
    result "moetrain starts" PASS "$(wc -l < "$work/last") configuration keys"
  fi

  local free
  free=$(disk_free)
  result "disk" PASS "$free free under $work" "free=$free"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [[ -n $sanitizer ]]; then result compute-sanitizer PASS "$sanitizer" "path=$sanitizer"
  else result compute-sanitizer SKIP "absent: a crashed parity group is reported without memcheck"; fi
}

# library_path NAME: the file the binaries load as NAME: what ldd resolves for them (linked libraries), else what
# dlopen would find (LD_LIBRARY_PATH, then the loader's cache), or nothing.
library_path() {
  local d path
  [[ $1 == libnccl.so.2 && -n ${MOETRAIN_NCCL_LIBRARY:-} ]] && { realpath "$MOETRAIN_NCCL_LIBRARY"; return; }
  path=$(ldd "$mt_bin" "$parity_bin" 2>/dev/null | awk -v n="$1" '$1 == n && $3 ~ /^\// { print $3; exit }')
  [[ -n $path ]] && { realpath "$path"; return; }
  local search=${LD_LIBRARY_PATH:-}
  for d in ${search//:/ }; do [[ -e $d/$1 ]] && { realpath "$d/$1"; return; }; done
  ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'
}
# find_cuda_libraries: puts the folders of cuBLASLt, cuDNN and the CUDA runtime (which cudnn-frontend opens) on
# LD_LIBRARY_PATH where the loader would not find them, and names NCCL's file in MOETRAIN_NCCL_LIBRARY (moetrain
# opens it at run time; the variable holds also when the binaries start through the bundle's runtime/): the CUDA
# toolkit's, else PyTorch's pip packages (nvidia-*).
find_cuda_libraries() {
  local sites lib dir
  read -ra sites <<<"$("$python" -c 'import site; print(*site.getsitepackages())' 2>/dev/null)"
  for lib in libcublasLt.so.13 libnccl.so.2 libcudnn.so.9 libcudart.so.13; do
    [[ -n $(library_path "$lib") && $lib != libnccl.so.2 ]] && continue
    [[ $lib == libnccl.so.2 && -n ${MOETRAIN_NCCL_LIBRARY:-} ]] && continue
    dir=$(for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
            /usr/local/cuda-13*/lib64 "${sites[@]/%//nvidia/cu13/lib}" "${sites[@]/%//nvidia/nccl/lib}" \
            "${sites[@]/%//nvidia/cudnn/lib}" "${sites[@]/%//nvidia/cublas/lib}"; do
            [[ -e $d/$lib ]] && echo "$d"; done | head -n 1)
    [[ -n $dir ]] || dir=$(timeout 30 find /usr /opt "${sites[@]}" -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)
    [[ -n $dir ]] || continue
    if [[ $lib == libnccl.so.2 ]]; then export MOETRAIN_NCCL_LIBRARY=$dir/$lib
    else export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
  done
}

section_parity() {
  if ! limited parity_list 20 "${parity[@]}" --list; then
    result "groups" FAIL "gpu_parity --list: $(last_line)"; return
  fi
  local groups group rc passed failed
  mapfile -t groups < <(grep -aE '^[a-z0-9_]+$' "$work/last")
  ((${#groups[@]} > 0)) || { result "groups" FAIL "gpu_parity --list printed no group"; return; }
  for group in "${groups[@]}"; do
    CUDA_LAUNCH_BLOCKING=1 limited "parity_$group" 60 "${parity[@]}" "${bin_args[@]}" --only "$group"
    rc=$?
    passed=$(grep -ac '^PASS' "$work/last") failed=$(grep -ac '^FAIL' "$work/last")
    case $rc in
      0) if ((passed > 0)); then result "$group" PASS "$passed checks" "passed=$passed"
         else result "$group" SKIP "no check ran: $(grep -a '^SKIP' "$work/last" | head -n 2 | cut -c1-90 | tr '\n' ';')"; fi ;;
      1) result "$group" FAIL "$failed of $((passed + failed)) failed: $(grep -a '^FAIL' "$work/last" | head -n 3 |
           cut -c6-90 | tr '\n' ';')" "passed=$passed failed=$failed" ;;
      77) result "$group" SKIP "$(last_line)" ;;
      125) result "$group" SKIP "not reached: the section's time is up" ;;
      *) parity_crash "$group" "$rc" "$passed" ;;
    esac
    fallback_lines | sed "s/^/$group: /" >> "$work/parity_fallbacks"
  done
  touch "$work/parity_fallbacks"
  fallbacks fallbacks "$work/parity_fallbacks"
}
# parity_crash GROUP RC PASSED: a group that died; run again under memcheck to say where.
parity_crash() {
  local group=$1 rc=$2 passed=$3 where
  where="exit $rc after $passed passed checks, last line: $(last_line | cut -c1-100)"
  if [[ -n $sanitizer ]] && ((!stand_in)); then
    cp "$work/last" "$work/crash"
    limited "memcheck_$group" 60 "$sanitizer" --tool memcheck --print-limit 20 "${parity[@]}" --only "$group"
    where="$where; memcheck: $(grep -aE 'Invalid|Error|error' "$work/last" | head -n 2 | tr '\n' ' ' | cut -c1-200)"
    { cat "$work/crash"; echo "== memcheck"; tail -n 20 "$work/last"; } > "$work/last.both"
    mv "$work/last.both" "$work/last"
  fi
  result "$group" FAIL "crashed: $where" "passed=$passed exit=$rc"
}

# The grouped GEMM's lines of gemm_bench: CUTLASS's kernel against the per-group loop. On a GPU every line must
# have run on CUTLASS (the bundle's kernels are Hopper's); the figures are the speedups over the loop.
grouped_result() {
  local lines figures
  lines=$(grep -acE '^grouped (cuda|cpu-strict) ' "$work/last")
  if ((lines == 0)); then result "grouped gemm" FAIL "gemm_bench printed no grouped line"; return; fi
  figures=$(awk '/^grouped (cuda|cpu-strict) / {
      for (i = 1; i <= NF; i++) { if ($i == ":") rate = $(i + 1); if ($i ~ /^path=/) path = substr($i, 6) }
      ratio = $NF + 0; if (path == "per-group") loop++
      if (rate + 0 > best) best = rate + 0
      if (ratio > 0 && (low == "" || ratio < low)) low = ratio; if (ratio > high) high = ratio }
    END { printf "grouped_best_tflops=%g speedup_min=%s speedup_max=%g per_group_lines=%d",
            best, low == "" ? "n/a" : low, high, loop }' "$work/last")
  if ((!stand_in)) && [[ $figures != *per_group_lines=0 ]]; then
    result "grouped gemm" FAIL "lines ran per group, not on CUTLASS: ${figures// /, }" "$figures"
  else
    result "grouped gemm" PASS "$lines lines; ${figures// /, }" "$figures"
  fi
}

section_gemm() {
  limited gemm_bench 120 "${gemm[@]}" "${bin_args[@]}"
  local rc=$? rows
  rows=$(grep -acE '^gemm (cuda|cpu-strict) ' "$work/last")
  if ((rc == 0 && rows > 0)); then
    # The best of each kind, with the operation as the trainer calls it and the matmul alone; FP8 rows whose
    # scale mode is fallback-fp32 did not run in FP8.
    local figures
    figures=$(awk '/^gemm (cuda|cpu-strict) (bf16|fp8) / {
        kind = $3; for (i = 1; i <= NF; i++) { if ($i == ":") whole = $(i + 1); if ($i == "only") alone = $(i + 1) }
        if (whole + 0 > best[kind]) best[kind] = whole + 0
        if (alone != "n/a" && alone + 0 > only[kind]) only[kind] = alone + 0
        if ($0 ~ /fallback-fp32/) fell++ }
      END { printf "bf16_tflops=%g bf16_matmul_tflops=%g fp8_tflops=%g fp8_matmul_tflops=%g fp8_rows_fallback=%d",
              best["bf16"], only["bf16"], best["fp8"], only["fp8"], fell }' "$work/last")
    result gemm_bench PASS "$rows rows; best ${figures// /, }" "rows=$rows $figures"
    fallbacks "gemm fallbacks"
  elif ((rc == 0)); then result gemm_bench SKIP "$(last_line)"
  else result gemm_bench FAIL "exit $rc: $(last_line)"; fi
  ((rc == 0 && rows > 0)) && grouped_result


  limited attention_bench 120 "${attention[@]}" "${bin_args[@]}"
  rc=$?
  cp "$work/last" "$work/attention_bench.out"
  rows=$(grep -ac '^attention moetrain' "$work/last")
  if ((rc == 0 && rows > 0)); then
    result attention_bench PASS "$rows rows, the first: $(grep -am1 '^attention moetrain' "$work/last" | cut -c1-120)" "rows=$rows"
  elif ((rc == 0)); then result attention_bench SKIP "$(last_line)"
  else result attention_bench FAIL "exit $rc: $(last_line)"; fi

  if ((stand_in)); then result "PyTorch SDPA" SKIP "stand-in: needs a GPU"
  elif ((!have_torch)); then result "PyTorch SDPA" SKIP "needs torch in $python"
  elif limited sdpa 120 "$python" bench/attention_sdpa.py && grep -aq '^attention pytorch' "$work/last"; then
    result "PyTorch SDPA" PASS "$(grep -a '^attention pytorch' "$work/last" | head -n 3 | tr '\n' ';')"
    attention_against_sdpa "$work/attention_bench.out" "$work/last"
  else result "PyTorch SDPA" FAIL "$(last_line)"; fi
}

# attention_against_sdpa BENCH SDPA: per case, moetrain's bf16 fwd+bwd TFLOP/s on cuDNN and on the own kernels
# against the best of PyTorch's SDPA backends at the same shape (the goal: cuDNN at least 0.9 of it).
attention_against_sdpa() {
  local line
  while IFS= read -r line; do result "attention vs SDPA" PASS "$line"; done < <(awk '
    /^attention (moetrain|pytorch-)/ && / bf16 / && /fwd\+bwd/ {
      name = $0; sub(/^attention [^ ]+ bf16 /, "", name); sub(/ batch=.*/, "", name)
      impl = $2; if (impl == "moetrain") { impl = name; sub(/.* on /, "", impl); sub(/ on .*/, "", name) }
      for (i = 1; i <= NF; i++) if ($i == "fwd+bwd") rate = $(i + 1) + 0
      key = name SUBSEP impl; tf[key] = rate; names[name] = 1
      if ($2 ~ /^pytorch-/ && rate > best[name]) { best[name] = rate; bestby[name] = $2 } }
    END { for (n in names) if (best[n] > 0)
            printf "%s: cudnn %.1f, own %.1f, %s %.1f TFLOP/s; cudnn/best %.2f\n", n, tf[n, "cudnn"], tf[n, "own"],
                   bestby[n], best[n], tf[n, "cudnn"] / best[n] }' "$1" "$2")
}

smoke_config=configs/deepseek-v3-small.toml
section_smoke() {
  need_shards || return
  local steps=12 half=6
  ((stand_in)) && steps=2 half=1
  local sets=(--set training.steps=$steps --set checkpoint.final=true)
  if ! train smoke_cpu 150 "$smoke_config" cpu cpu "${sets[@]}"; then
    result "cpu run" FAIL "$(last_line)"; return
  fi
  if ! train smoke_cuda 120 "$smoke_config" cuda "$device" "${sets[@]}"; then
    result "$device against cpu" FAIL "the $device run: $(last_line)"
  else
    same_losses "$device against cpu" 1e-3 "$runs/cpu.out" "$runs/cuda.out" "" "steps=$steps"
  fi
  # The decoder on the device: the cpu run's checkpoint continued greedily on both gives the same text.
  text() { grep -av '^sample: ' "$work/last"; }
  if limited sample_cpu 60 "${mt[@]}" sample "$runs/cpu" --tokens 40 --temperature 0 --device cpu && text > "$work/sample_cpu" &&
      limited sample_device 60 "${mt[@]}" sample "$runs/cpu" --tokens 40 --temperature 0 --device "$device"; then
    if [[ -s $work/sample_cpu ]] && text | cmp -s - "$work/sample_cpu"; then
      result "sample on $device" PASS "40 greedy tokens, cpu's text; $(grep -ao '[0-9.]* tokens/s' "$work/last")"
    else
      result "sample on $device" FAIL "$device wrote '$(text | head -c 80)', cpu '$(head -c 80 "$work/sample_cpu")'"
    fi
  else
    result "sample on $device" FAIL "$(last_line)"
  fi
  local first second name
  for pair in "cpu $device" "$device cpu"; do
    read -r first second <<<"$pair"
    name=${first}_then_$second
    # The two halves' step lines together: every step, for the comparison without h5py.
    if ! { train "resume_${first}_first" 150 "$smoke_config" "$name" "$first" "${sets[@]}" --set checkpoint.resume=auto \
             --stop-after "$half" && mv "$runs/$name.out" "$runs/$name.first"; } ||
       ! { train "resume_${second}_second" 150 "$smoke_config" "$name" "$second" "${sets[@]}" --set checkpoint.resume=auto &&
             cat "$runs/$name.first" "$work/last" > "$runs/$name.out"; }; then
      result "resume $first -> $second" FAIL "$(last_line)"
    elif ! grep -aq "resume .*(step $half)" "$work/last"; then
      result "resume $first -> $second" FAIL "the $second run did not resume from step $half"
    else
      same_losses "resume $first -> $second" 1e-3 "$runs/cpu.out" "$runs/$name.out" \
        "against the cpu run, steps $((half + 1))-$steps: "
    fi
    forget "$name"
    rm -f "$runs/$name.first"
  done
  keep_log cuda
  forget cpu
}

section_gpt2() {
  # llm.c trains GPT-2 124M at about 46-56% MFU on an H100; moetrain's dense model of that shape (SwiGLU sized
  # to GPT-2's MLP parameters, RoPE, RMSNorm) is read against it.
  need_shards || return
  versus gpt2 bench/gpt2-124m.toml 20
  graph_speed gpt2 bench/gpt2-124m.toml 20
  counters gpt2 bench/gpt2-124m.toml
}

section_moe1b() {
  need_shards || return
  local cfg=configs/moe-1b.toml
  versus moe1b "$cfg" 15
  graph_speed moe1b "$cfg" 15
  local bf16_tps=$speed_tps
  # Where a step's device time goes, by op kind (CUDA events around every op).
  if train profile 150 "$(speed_config "$cfg")" profile "$device" --profile --set training.steps=4 \
      --set precision.matmul=bf16 && grep -aq '^  all ops' "$work/last"; then
    result profile PASS "ms per step: $(grep -aA4 '^  op ' "$work/last" | tail -n 4 |
      awk '{ printf "%s%s %s (%s)", (NR > 1 ? ", " : ""), $1, $3, $4 }'); all ops $(grep -a '^  all ops' "$work/last" |
      awk '{ print $3 }')"
    counter_result "counters moe-1b"
  else
    result profile FAIL "$(last_line)"
  fi
  forget profile
  # FP8 (DeepSeek-V3's recipe) against the bf16 run above.
  if speed moe1b_fp8 "$cfg" 15 --set precision.matmul=fp8; then
    local ratio=n/a
    [[ -n $bf16_tps ]] && ratio=$(awk -v a="$speed_tps" -v b="$bf16_tps" 'BEGIN { printf "%.2f", a / b }')
    result "fp8 against bf16" PASS "fp8 $speed_tps tok/s, bf16 ${bf16_tps:-failed}, ratio $ratio" \
      "fp8_tokens_per_s=$speed_tps bf16_tokens_per_s=${bf16_tps:-none} ratio=$ratio"
    fallbacks "fp8 fallbacks"
  else
    result "fp8 against bf16" FAIL "the fp8 run: $(last_line)"
  fi
  # The trainer's memory beside the planner's for the same run.
  if limited plan_memory 60 "${mt[@]}" train "$(speed_config "$cfg")" "${data_sets[@]}" --set precision.device="$device" \
      --set precision.matmul=bf16 --dry-run --cluster configs/clusters/h100-superpod.toml; then
    result "planned memory" PASS "$(grep -a '^  memory ' "$work/last" | sed 's/^  memory *//')"
  else
    result "planned memory" FAIL "$(last_line)"
  fi
}

section_dsv3() {
  need_shards || return
  local cfg=bench/dsv3-layers.toml check="tokens/s dsv3-layers"
  real_config_valid dsv3 "$cfg" "$check" || return
  if ! speed dsv3 "$cfg" 10; then result "$check" FAIL "the moetrain run: $(last_line)"; return; fi
  result "$check" PASS "moetrain $speed_tps tok/s (MFU $speed_mfu)" "tokens_per_s=$speed_tps mfu=$speed_mfu"
  # PyTorch beside it only with time for it (its eager model of 18 GB of parameters is slow to build).
  local left=$(( (section_end < deadline ? section_end : deadline) - SECONDS ))
  if ((left < 90 && !stand_in)); then result "PyTorch dsv3-layers" SKIP "$left s left in the section"
  elif pytorch dsv3 "$cfg"; then
    result "PyTorch dsv3-layers" PASS "PyTorch eager bf16 $torch_tps tok/s, ratio $(awk -v a="$speed_tps" \
      -v b="$torch_tps" 'BEGIN { printf "%.2f", a / b }')" "torch_tokens_per_s=$torch_tps"
  else
    result "PyTorch dsv3-layers" SKIP "$torch_why"
  fi
}

section_nccl() {
  NCCL_DEBUG=WARN limited nccl_test 60 "${nccl[@]}"
  local rc=$?
  if ((rc != 0 && rc != 77 && rc != 125)); then
    NCCL_DEBUG=WARN NCCL_CUMEM_ENABLE=0 limited nccl_test_nocumem 60 "${nccl[@]}"
    local rc2=$?
    ((rc2 == 0)) && rc=0 nccl_note="; passed again with NCCL_CUMEM_ENABLE=0 after exit $rc"
  fi
  case $rc in
    0) result nccl_test PASS "$(grep -ac '^PASS' "$work/last") checks${nccl_note:-}" ;;
    77) result nccl_test SKIP "$(last_line | cut -c1-150)" ;;
    125) result nccl_test SKIP "not reached: the section's time is up" ;;
    *) result nccl_test FAIL "exit $rc: $(grep -a '^FAIL' "$work/last" | head -n 3 | tr '\n' ' ')$(last_line)" ;;
  esac
  # smoke's device run again with every group an NCCL communicator: the same losses. In the stand-in (no NCCL
  # without a GPU) the same run over the default communicator, which proves the comparison.
  local comm=(--set parallel.comm=nccl) check="one rank over NCCL"
  ((stand_in)) && comm=() check="one rank over the default communicator"
  if [[ ! -s $runs/cuda.out ]]; then result "$check" SKIP "needs smoke's $device run"; return; fi
  local steps=12
  ((stand_in)) && steps=2
  local again="" trained=0
  if NCCL_DEBUG=WARN train nccl_train 120 "$smoke_config" cuda_nccl "$device" --set training.steps=$steps "${comm[@]}"; then
    trained=1
  elif ((!stand_in)) && NCCL_DEBUG=WARN NCCL_CUMEM_ENABLE=0 train nccl_train_nocumem 120 "$smoke_config" cuda_nccl \
      "$device" --set training.steps=$steps "${comm[@]}"; then
    trained=1 again="; passed again with NCCL_CUMEM_ENABLE=0"
  fi
  if ((!trained)); then
    result "$check" FAIL "$(last_line)"
  elif ((!stand_in)) && ! grep -aq 'comm     NCCL' "$work/last"; then
    result "$check" FAIL "the banner does not say NCCL: $(grep -am1 '^  comm' "$work/last")"
  else
    same_losses "$check" 1e-5 "$runs/cuda.out" "$runs/cuda_nccl.out" "against smoke's $device run$again: "
  fi
  forget cuda_nccl
}

section_oracle() {
  if ((!have_torch || !have_h5py)); then result oracle SKIP "needs torch, numpy, h5py and tomllib in $python"; return; fi
  local only=""
  ((stand_in)) && only="mha_sequence_aux mla"
  # Every configuration in fp32; bf16 and FP8 (both formats) for two of them, within the section's time.
  ORACLE_ONLY=$only MOETRAIN="${mt[*]}" ORACLE_DEVICE="$device" PYTHON="$python" limited oracle 260 bash -c \
    'ORACLE_PRECISIONS=fp32 bash tests/oracle/run_oracle.sh
     ORACLE_ONLY="mha_sequence_aux mla_q_lora_grouped" ORACLE_PRECISIONS="bf16 fp8 fp8_e5m2" \
       bash tests/oracle/run_oracle.sh'
  local passed failed
  passed=$(grep -ac '^PASS' "$work/last") failed=$(grep -ac '^FAIL' "$work/last")
  if ((failed == 0 && passed > 0)); then result oracle PASS "$passed configurations" "passed=$passed"
  else result oracle FAIL "$failed failed: $(grep -a '^FAIL' "$work/last" | cut -d' ' -f3 | tr '\n' ' ')" "passed=$passed failed=$failed"; fi
}

section_layouts() {
  # Each case trains on one rank and on its layout's ranks, all on this GPU, payloads staged through host memory.
  local cases=""
  ((stand_in)) && cases=1
  printf '#!/usr/bin/env bash\nexec %s "$@"\n' "${mt[*]}" > "$work/moetrain"
  chmod +x "$work/moetrain"
  MPI_MATRIX_CASES=$cases MOETRAIN="$work/moetrain" MPIRUN="$mpirun_bin" MPI_MATRIX_ONLY=1 MPI_MATRIX_DEVICE="$device" \
    MPI_MATRIX_SET=parallel.share_gpu=true PYTHON="$python" limited layouts 540 bash tests/mpi/run_mpi_tests.sh
  local rc=$? passed failed
  passed=$(grep -ac '^PASS' "$work/last") failed=$(grep -ac '^FAIL' "$work/last")
  if ((failed > 0)); then
    result "layout matrix" FAIL "$failed of $((passed + failed)) failed: $(grep -a '^FAIL' "$work/last" | cut -d' ' -f2- |
      cut -d: -f1 | head -n 3 | tr '\n' ';')" "passed=$passed failed=$failed"
  elif ((passed == 0)); then result "layout matrix" FAIL "exit $rc, no case ran: $(last_line)"
  else result "layout matrix" PASS "$passed cases$( ((rc == 124)) && echo "; stopped by the budget")" "passed=$passed"; fi
}

section_fit() {
  need_shards || return
  local cfg sizes=(1 2 4 8 16 32 64)
  cfg=$(speed_config configs/moe-1b.toml)
  ((stand_in)) && sizes=(1 2)
  local mode mb ours planned sets
  for mode in none selective full; do
    ours=0 planned=0
    for mb in "${sizes[@]}"; do
      sets=(--set training.micro_batch=$mb --set training.global_batch=$mb --set training.recompute=$mode)
      if limited "plan_fit_${mode}_$mb" 60 "${mt[@]}" train "$cfg" "${sets[@]}" "${data_sets[@]}" \
          --set precision.device="$device" --dry-run --cluster configs/clusters/h100-superpod.toml &&
          grep -aq '^  memory .*: fits' "$work/last"; then planned=$mb; fi
      if ((ours == mb / 2 || mb == 1)) && train "fit_${mode}_$mb" 120 "$cfg" "fit_${mode}_$mb" "$device" "${sets[@]}" \
          --set training.steps=2; then ours=$mb; fi
      forget "fit_${mode}_$mb"
    done
    result "largest micro-batch, recompute=$mode" PASS "trains: $ours sequences; the planner says: $planned" \
      "trains=$ours planned=$planned"
  done
}

# ---- the run -----------------------------------------------------------------------------------------------
note "moetrain GPU check$( ((stand_in)) && echo " (stand-in: cpu-strict)"), $(date -u '+%Y-%m-%d %H:%M:%S UTC'); report in $OUT"
# The bundle travels as gpu-bundle.tgz (a third of its size: a device call carries at most 64 MiB with the tree).
if ((!stand_in)) && [[ ! -x $bundle/moetrain && -f $bundle.tgz ]]; then
  tar -xzf "$bundle.tgz" -C "$(dirname "$bundle")" || { note "FAIL: $bundle.tgz does not unpack"; exit 1; }
fi
if ((!stand_in)) && [[ ! -x $bundle/moetrain || ! -f $bundle/BUILD_INFO ]]; then
  note "FAIL: $bundle/ is missing or incomplete: run make gpu-bundle on the build machine and bring gpu-bundle.tgz along"
  exit 1
fi
# The libraries the loader would not find, and a host glibc or libstdc++ older than the bundle's (then the
# binaries start through the bundle's own runtime/).
launch=()
if ((!stand_in)); then
  find_cuda_libraries
  if ! err=$("$mt_bin" keys 2>&1 >/dev/null); then
    launch=("$bundle/runtime/ld-linux-x86-64.so.2" --library-path "$bundle/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    note "the binaries do not start with this machine's libraries ($err): they run with the bundle's runtime/"
  fi
fi
# What the Python side can do (preflight reports it; later sections choose by it, also when run alone).
# One interpreter start imports each module once (torch takes seconds): "NAME VERSION" for those present.
declare -A python_modules=()
while read -r mod version; do python_modules[$mod]=$version; done < <("$python" -c '
import importlib
for name in ("torch", "numpy", "h5py", "tomllib"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "present"))
    except Exception:
        pass' 2>/dev/null)
[[ -n ${python_modules[torch]:-} ]] && have_torch=1
[[ -n ${python_modules[h5py]:-} && -n ${python_modules[numpy]:-} && -n ${python_modules[tomllib]:-} ]] && have_h5py=1
mt=("${launch[@]}" "$mt_bin") parity=("${launch[@]}" "$parity_bin") gemm=("${launch[@]}" "$gemm_bin")
attention=("${launch[@]}" "$attention_bin") nccl=("${launch[@]}" "$nccl_bin")
slack=0
for section in "${order[@]}"; do
  [[ $selected == *" $section "* ]] || continue
  begun=$SECONDS check_mark=$SECONDS
  section_end=$((SECONDS + ${estimate[$section]} * stretch + slack))
  note ""
  ((section_end > deadline)) && section_end=$deadline
  note "== $section (estimate ${estimate[$section]} s, budget $((section_end - SECONDS)) s; $(disk_free) disk free)"
  if ((deadline - SECONDS < 5)); then
    result "$section" SKIP "not reached: the check's time is up"
  elif [[ -n $no_gpu && $section != preflight ]]; then
    result "$section" SKIP "$no_gpu"
  else
    "section_$section"
  fi
  spent=$((SECONDS - begun))
  slack=$((slack + ${estimate[$section]} * stretch - spent)); ((slack < 0)) && slack=0
  note "== $section: $spent s spent of ${estimate[$section]} estimated; $(disk_free) disk free"
  pack
done
section=summary
note ""
note "== summary ($((SECONDS - start)) s; $failures failed)"
for r in "${results[@]}"; do note "$r"; done
((failures == 0))
