#!/usr/bin/env bash
# moetrain's check on a GPU machine, run from the repository root with gpu-bundle/ (make gpu-bundle) in it:
#   bash scripts/gpu_check.sh
# Builds nothing. Writes one report, $OUT/gpu_report.txt (OUT defaults to ./gpu-out), and prints its tail: the
# machine, the bundle's build info, then eight sections, each ending in PASS, FAIL or SKIP with the reason:
#   (a) per-op parity: gpu-bundle/gpu_parity, every CUDA op against the CPU reference;
#   (b) end to end: configs/deepseek-v3-small.toml for 50 steps on cuda and on cpu, every step's loss within 1e-3
#       relative; runs stopped at step 25 on one device and resumed on the other match the cpu run too;
#   (c) benchmarks: gemm_bench, attention_bench beside PyTorch's scaled_dot_product_attention, and moetrain's tokens/s and MFU on cuda against the PyTorch reference model (eager,
#       bf16 autocast) on the same model and batch, for the demo's model and one of about 1B parameters;
#       and moetrain's FP8 training (DeepSeek-V3's recipe) against its BF16 on the 1B model, and where a step's time
#       goes on the 1B model by op kind (train --profile);
#   (d) the PyTorch oracle's thirteen configurations with moetrain's step on cuda;
#   (e) NCCL, one rank: gpu-bundle/nccl_test, every NcclComm call on a world of one against exact results, and
#       (b)'s cuda run again with parallel.comm = "nccl" (every group an NCCL communicator), the same losses;
#   (f) the multi-rank layout matrix of tests/mpi/run_mpi_tests.sh with every rank on this GPU, payloads staged
#       through host memory (parallel.share_gpu), under the bundle's OpenMPI (gpu-bundle/mpi/mpirun).
#   (g) speed targets: a dense model of GPT-2 124M's shape (MFU, beside llm.c's published 46-56%) and DeepSeek-V3's
#       layer shapes (bench/dsv3-layers.toml), each against the PyTorch reference model as in (c);
#   (h) the largest micro-batch of configs/moe-1b.toml that trains with recompute none, selective and full, beside
#       the largest the planner's memory model says fits.
# GPU_CHECK_SECTIONS picks sections (default abcdefgh; GPU_CHECK_SECTIONS=f runs only (f), as a second call
# when the first one's time is spent: the default run reaches about (e), so (f), (g) and (h) each want one).
# A section whose prerequisite fails says which and why, and the next section runs. Everything stops by
# GPU_CHECK_SECONDS (default 540) so that a run fits in the GPU machine's 10 minutes a command.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-540}))
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
report=$OUT/gpu_report.txt
: > "$report"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bundle=$PWD/gpu-bundle
python=${PYTHON:-python3}
exp=configs/deepseek-v3-small.toml
steps=50 half=25 tol=1e-3
results=() status=0
sections=${GPU_CHECK_SECTIONS:-abcdefgh}
want() { [[ $sections == *$1* ]]; }

say() { echo "$*" >> "$report"; }
note() { echo "$*" | tee -a "$report"; }
result() { results+=("$*"); note "$*"; [[ $* != *": FAIL"* ]] || status=1; }

# limited SECONDS CMD...: runs CMD with its output indented into the report, stopping it after SECONDS or at
# the deadline, whichever comes first. Returns CMD's status, 124 when stopped; the output stays in $work/last.
limited() {
  local want=$1 left=$((deadline - SECONDS)) rc
  shift
  if ((left < 5)); then
    echo "not run: the check's time is up" > "$work/last"; say "    (not run: the check's time is up)"; return 124
  fi
  ((want > left)) && want=$left
  say "\$ ${*#"$bundle/"}"
  timeout --kill-after=5 "$want" "$@" > "$work/last" 2>&1
  rc=$?
  ((rc == 124 || rc == 137)) && { echo "stopped after $want s" >> "$work/last"; rc=124; }
  sed 's/^/    /' "$work/last" >> "$report"
  return $rc
}

note "moetrain GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), report $report"
if [[ ! -x $bundle/moetrain || ! -f $bundle/BUILD_INFO ]]; then
  note "FAIL: $bundle/ is missing or incomplete: run make gpu-bundle on the build machine and bring gpu-bundle/ along"
  exit 1
fi

say ""; say "== machine"
say "$(uname -srm); $(ldd --version 2>&1 | head -n 1); $(nproc) cores"
if smi=$(timeout 20 nvidia-smi 2>&1); then
  say "$smi"
  say "$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1)"
else
  say "nvidia-smi: $smi"
fi
say "python: $("$python" -c 'import sys, torch, h5py; print(sys.version.split()[0], "torch", torch.__version__,
  "cuda", torch.version.cuda, "h5py", h5py.__version__)' 2>&1 | tail -n 1)"
say ""; say "== bundle"
say "$(cat "$bundle/BUILD_INFO")"

# The bundle expects the host's libcublasLt.so.13 and libcublas.so.13 (one folder holds both); a toolkit
# outside the loader's paths is looked for.
if ldd "$bundle/gpu_parity" 2>&1 | grep -q 'libcublasLt.so.13 => not found'; then
  dir=$(for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
          /usr/local/cuda-13*/lib64; do [[ -e $d/libcublasLt.so.13 ]] && echo "$d"; done | head -n 1)
  read -ra sites <<<"$("$python" -c 'import site; print(*site.getsitepackages())' 2>/dev/null)"
  [[ -n $dir ]] || dir=$(timeout 60 find /usr /opt "${sites[@]}" -name libcublasLt.so.13 -print -quit 2>/dev/null |
                         xargs -r dirname)
  if [[ -z $dir ]]; then
    note "FAIL: no libcublasLt.so.13 on this machine (CUDA 13 toolkit); set CUDA_HOME to the toolkit"
    exit 1
  fi
  export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "libcublasLt.so.13 from $dir"
fi
# moetrain and nccl_test expect the host's libnccl.so.2: the CUDA toolkit's, or else PyTorch's pip package
# nvidia-nccl.
nccl_problem=""
if ldd "$bundle/moetrain" 2>&1 | grep -q 'libnccl.so.2 => not found'; then
  read -ra sites <<<"$("$python" -c 'import site; print(*site.getsitepackages())' 2>/dev/null)"
  dir=$(for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
          "${sites[@]/%//nvidia/nccl/lib}"; do [[ -e $d/libnccl.so.2 ]] && echo "$d"; done | head -n 1)
  [[ -n $dir ]] || dir=$(timeout 60 find /usr /opt "${sites[@]}" -name libnccl.so.2 -print -quit 2>/dev/null |
                         xargs -r dirname)
  if [[ -n $dir ]]; then
    export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "libnccl.so.2 from $dir"
  else
    note "FAIL: no libnccl.so.2 on this machine (CUDA toolkit, or pip install nvidia-nccl-cu13): moetrain needs it"
    exit 1
  fi
fi
# A host glibc or libstdc++ older than the bundle's: start the binaries through the bundle's own runtime/.
launch=()
if ! err=$("$bundle/moetrain" keys 2>&1 >/dev/null); then
  say "the binaries do not start with this machine's libraries: $err"
  launch=("$bundle/runtime/ld-linux-x86-64.so.2" --library-path "$bundle/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  if ! err=$("${launch[@]}" "$bundle/moetrain" keys 2>&1 >/dev/null); then
    note "FAIL: gpu-bundle/moetrain does not start, with this machine's libraries or the bundle's runtime/: $err"
    exit 1
  fi
  say "running them with the bundle's runtime/ (glibc, libstdc++) instead"
fi
mt=("${launch[@]}" "$bundle/moetrain")
no_gpu=""        # why there is no GPU to test, once (a) or nvidia-smi has shown it
cuda_problem=""  # why moetrain cannot train on cuda here, once the cuda run has shown it
timeout 20 nvidia-smi -L > /dev/null 2>&1 || no_gpu="no GPU: nvidia-smi lists none"
runs=$work/runs
# Token shards from the repository's own text (the GPU machine has no fortunes corpus), made once.
inputs=(); for d in $(find src -type f -printf '%h\n' | sort -u); do inputs+=(--input "$d"); done
shards() { [[ -s $work/data/train_000000.bin ]] || limited 60 "${mt[@]}" prepare "${inputs[@]}" --out "$work/data"; }

# Median tokens/s and MFU of a log.h5 after its first 5 steps: "TOKENS MFU".
median_speed() {
  "$python" -c 'import sys, h5py, statistics; f = h5py.File(sys.argv[1], "r")
print(round(statistics.median(f["tokens_per_s"][5:])), "%.4f" % statistics.median(f["mfu"][5:]))' "$1"
}
# speed SECTION CONFIG STEPS: moetrain on cuda (bf16 GEMMs) against the PyTorch reference model in eager mode under bf16
# autocast, same model, weights and batch; MFU against the GPU's dense BF16 peak for both.
speed() { local section=$1 cfg=$2 n=$3 name ours theirs what mfu=""
  name=$(basename "$cfg" .toml)
  what="$cfg, bf16 GEMMs, median tokens/s"
  if [[ -n $no_gpu ]]; then result "($section) tokens/s $name: SKIP ($no_gpu)"; return; fi
  if [[ -n $cuda_problem ]]; then result "($section) tokens/s $name: SKIP ($cuda_problem)"; return; fi
  if ! shards; then result "($section) tokens/s $name: SKIP (no token shards)"; return; fi
  local data=(--set data.train="$work/data/train_000000.bin" --set data.val="$work/data/val_000000.bin")
  if limited 200 "${mt[@]}" train "$cfg" "${data[@]}" --set training.steps="$n" --set run.out_dir="$runs" \
      --set run.name="speed_$name" --set precision.device=cuda --set precision.matmul=bf16 --set training.eval_every=0 \
      --set checkpoint.every=0 --set checkpoint.resume=never; then
    read -r ours mfu <<<"$(median_speed "$runs/speed_$name/log.h5")"
    # The run's memory per rank beside the planner's for moetrain's own storage.
    local measured planned
    measured=$(grep '^memory:' "$work/last" | sed 's/^memory: per rank (the most of any rank): //')
    if limited 60 "${mt[@]}" train "$cfg" "${data[@]}" --set precision.device=cuda --set precision.matmul=bf16 \
        --dry-run --cluster configs/clusters/h100-superpod.toml; then
      planned=$(grep '^  memory ' "$work/last" | sed 's/^  memory *//')
      result "($section) memory $name: INFO (trainer: ${measured:-no memory line}; planner: ${planned:-no prediction})"
    fi
  else
    ours="the run failed: $(tail -n 1 "$work/last")"
  fi
  if limited 120 "${mt[@]}" dump-step "$cfg" --start-only --out "$work/start_$name.h5" "${data[@]}" &&
    limited 200 "$python" bench/torch_train.py "$work/start_$name.h5" 20 "$(nproc)" cuda bf16; then
    theirs=$(sed -En 's/.*median ([0-9]+) tokens.*/\1/p' "$work/last")
  else
    theirs="failed: $(tail -n 1 "$work/last")"
  fi
  if [[ $ours =~ ^[0-9]+$ && $theirs =~ ^[0-9]+$ ]]; then
    # Same FLOPs per token and peak: PyTorch's MFU scales with its tokens/s.
    result "($section) tokens/s $name: PASS ($what: moetrain $ours (MFU $mfu), PyTorch eager $theirs (MFU $(awk -v t="$theirs" \
      -v m="$mfu" -v o="$ours" 'BEGIN { printf "%.4f", m * t / o }')), ratio \
      $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }'))"
  else
    result "($section) tokens/s $name: FAIL ($what: moetrain: $ours; PyTorch: $theirs)"
  fi
}
if want a; then
say ""; say "== (a) per-op parity: gpu_parity, CUDA ops against the CPU reference"
limited 120 "${launch[@]}" "$bundle/gpu_parity"
rc=$?
((rc == 77)) && no_gpu=$(tail -n 1 "$work/last")
case $rc in
  0) result "(a) per-op parity: PASS ($(grep -c '^PASS' "$work/last") checks)" ;;
  77) result "(a) per-op parity: SKIP ($(tail -n 1 "$work/last"))" ;;
  *) result "(a) per-op parity: FAIL ($(grep -c '^FAIL' "$work/last") failed: $(grep '^FAIL' "$work/last" |
       cut -d' ' -f2 | head -n 5 | tr '\n' ' ')$(tail -n 1 "$work/last"))" ;;
esac

fi
if want b; then
say ""; say "== (b) end to end: $exp, $steps steps, cuda against cpu (loss within $tol relative)"
# compare_losses REF RUN: every step's loss of RUN against REF's; prints the largest relative difference.
compare_losses() {
  "$python" - "$tol" "$@" <<'PY'
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
}
common=(--set training.steps="$steps" --set log.every=10 --set checkpoint.every=0 --set run.out_dir="$runs"
        --set data.train="$work/data/train_000000.bin" --set data.val="$work/data/val_000000.bin")
# train NAME DEVICE SECONDS [ARGS...]
train() { local name=$1 device=$2 seconds=$3; shift 3
  limited "$seconds" "${mt[@]}" train "$exp" "${common[@]}" --set run.name="$name" --set precision.device="$device" \
    "$@"; }
if ! shards; then
  result "(b) end to end: FAIL (moetrain prepare: $(tail -n 1 "$work/last"))"
elif ! train cpu cpu 150; then
  result "(b) end to end: FAIL (the cpu run: $(tail -n 1 "$work/last"))"
else
  train cuda cuda 120
  rc=$?
  if ((rc == 2)) && grep -q 'cannot be used' "$work/last"; then
    cuda_problem="precision.device=cuda refused: $(grep -m1 'cannot be used' "$work/last" |
      sed 's/.*cannot be used: //; s/; set precision.device.*//')"
    result "(b) end to end: SKIP ($cuda_problem)"
  elif ((rc != 0)); then
    cuda_problem="the cuda run failed (exit $rc): $(tail -n 1 "$work/last")"
    result "(b) end to end: FAIL ($cuda_problem)"
  elif compare_losses "$runs/cpu/log.h5" "$runs/cuda/log.h5" > "$work/cmp" 2>&1; then
    result "(b) end to end: PASS ($(cat "$work/cmp"))"
  else
    result "(b) end to end: FAIL ($(tail -n 1 "$work/cmp"))"
  fi
  # The decoder on the GPU: the cpu run's checkpoint continued greedily on both devices gives the
  # same text (its logits agree to fp32 rounding; a near tie could still pick another token).
  if [[ -z $cuda_problem ]]; then
    text() { grep -v '^sample: ' "$work/last"; }
    if limited 60 "${mt[@]}" sample "$runs/cpu" --tokens 40 --temperature 0 --device cpu && text > "$work/sample_cpu" &&
      limited 60 "${mt[@]}" sample "$runs/cpu" --tokens 40 --temperature 0 --device cuda; then
      if [[ -s $work/sample_cpu ]] && text | cmp -s - "$work/sample_cpu"; then
        result "(b) sample on cuda: PASS (40 greedy tokens, cpu's text; $(grep -o '[0-9]* tokens/s' "$work/last"))"
      else
        result "(b) sample on cuda: FAIL (cuda wrote '$(text | head -c 80)', cpu '$(head -c 80 "$work/sample_cpu")')"
      fi
    else
      result "(b) sample on cuda: FAIL ($(tail -n 1 "$work/last"))"
    fi
  fi
  for pair in "cpu cuda" "cuda cpu"; do
    read -r first second <<<"$pair"
    name=${first}_then_$second
    if [[ -n $cuda_problem ]]; then
      result "(b) resume $first -> $second: SKIP (needs training on cuda: $cuda_problem)"
      continue
    fi
    if ! { train "$name" "$first" 150 --stop-after $half && train "$name" "$second" 150; }; then
      result "(b) resume $first -> $second: FAIL ($(tail -n 1 "$work/last"))"
    elif ! grep -q "resume .*(step $half)" "$work/last"; then
      result "(b) resume $first -> $second: FAIL (the $second run did not resume from step $half)"
    elif compare_losses "$runs/cpu/log.h5" "$runs/$name/log.h5" > "$work/cmp" 2>&1; then
      result "(b) resume $first -> $second: PASS (against the cpu run: $(cat "$work/cmp"))"
    else
      result "(b) resume $first -> $second: FAIL ($(tail -n 1 "$work/cmp"))"
    fi
  done
fi

fi
if want c; then
say ""; say "== (c) benchmarks"
limited 120 "${launch[@]}" "$bundle/gemm_bench"
rc=$?
if ((rc == 0)) && grep -q 'gemm cuda' "$work/last"; then
  result "(c) gemm_bench: PASS ($(grep 'gemm cuda bf16' "$work/last" | tail -n 1))"
elif ((rc == 0)); then result "(c) gemm_bench: SKIP ($(grep 'skipped' "$work/last"))"
else result "(c) gemm_bench: FAIL (exit $rc: $(tail -n 1 "$work/last"))"; fi
# Causal attention forward+backward: moetrain's kernels (bf16 on tensor cores, fp32 on CUDA cores) beside
# PyTorch's scaled_dot_product_attention, the same cases and FLOP counts.
limited 120 "${launch[@]}" "$bundle/attention_bench"
rc=$?
if ((rc == 0)) && grep -q '^attention moetrain' "$work/last"; then
  while read -r line; do result "(c) $line: INFO"; done < <(grep '^attention moetrain bf16' "$work/last")
  result "(c) attention_bench: PASS"
elif ((rc == 0)); then result "(c) attention_bench: SKIP ($(grep 'skipped' "$work/last"))"
else result "(c) attention_bench: FAIL (exit $rc: $(tail -n 1 "$work/last"))"; fi
if limited 120 "$python" bench/attention_sdpa.py && grep -q '^attention pytorch' "$work/last"; then
  while read -r line; do result "(c) $line: INFO"; done < <(grep '^attention pytorch' "$work/last")
else result "(c) attention_sdpa.py: SKIP ($(tail -n 1 "$work/last"))"; fi

# The demo's model and one of about 1B parameters (d_model 2048).
speed c configs/tiny.toml 30
speed c configs/moe-1b.toml 15

# One-GPU training in FP8 (DeepSeek-V3's recipe) against BF16 GEMMs, the 1B model.
fp8_speed() { local cfg=$1 n=$2 name tps=() mm
  name=$(basename "$cfg" .toml)
  if [[ -n $no_gpu || -n $cuda_problem ]]; then result "(c) fp8 against bf16 $name: SKIP (${no_gpu:-$cuda_problem})"; return; fi
  if ! shards; then result "(c) fp8 against bf16 $name: SKIP (no token shards)"; return; fi
  for mm in fp8 bf16; do
    if [[ $mm == bf16 && -s $runs/speed_$name/log.h5 ]]; then  # the bf16 run of the comparison above
      read -r t _ <<<"$(median_speed "$runs/speed_$name/log.h5")"; tps+=("$t"); continue
    fi
    if limited 200 "${mt[@]}" train "$cfg" --set data.train="$work/data/train_000000.bin" \
        --set data.val="$work/data/val_000000.bin" --set training.steps="$n" --set run.out_dir="$runs" \
        --set run.name="speed_${name}_$mm" --set precision.device=cuda --set precision.matmul=$mm \
        --set training.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never; then
      read -r t _ <<<"$(median_speed "$runs/speed_${name}_$mm/log.h5")"; tps+=("$t")
    else
      result "(c) fp8 against bf16 $name: FAIL (the $mm run: $(tail -n 1 "$work/last"))"; return
    fi
  done
  result "(c) fp8 against bf16 $name: PASS (median tokens/s: fp8 ${tps[0]}, bf16 ${tps[1]}, ratio $(awk -v a="${tps[0]}" \
    -v b="${tps[1]}" 'BEGIN { printf "%.2f", a / b }'))"
}
fp8_speed configs/moe-1b.toml 15

# Where a step's device time goes on the 1B model, by op kind (--profile; CUDA events around every op).
profile() { local cfg=$1 n=$2 name
  name=$(basename "$cfg" .toml)
  if [[ -n $no_gpu || -n $cuda_problem ]]; then result "(c) profile $name: SKIP (${no_gpu:-$cuda_problem})"; return; fi
  if ! shards; then result "(c) profile $name: SKIP (no token shards)"; return; fi
  if limited 200 "${mt[@]}" train "$cfg" --profile --set data.train="$work/data/train_000000.bin" \
      --set data.val="$work/data/val_000000.bin" --set training.steps="$n" --set run.out_dir="$runs" \
      --set run.name="profile_$name" --set precision.device=cuda --set precision.matmul=bf16 \
      --set training.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never &&
      grep -q '^  all ops' "$work/last"; then
    result "(c) profile $name: PASS (ms per step: $(grep -A4 '^  op ' "$work/last" | tail -n 4 |
      awk '{ printf "%s%s %s (%s)", (NR > 1 ? ", " : ""), $1, $3, $4 }'); all ops $(grep '^  all ops' "$work/last" |
      awk '{ print $3 }'))"
  else
    result "(c) profile $name: FAIL ($(tail -n 1 "$work/last"))"
  fi
}
profile configs/moe-1b.toml 4

fi
if want d; then
say ""; say "== (d) the PyTorch oracle with moetrain's step on cuda (tests/oracle/run_oracle.sh, 11 configurations)"
if [[ -n $no_gpu ]]; then
  result "(d) oracle on cuda: SKIP ($no_gpu)"
elif [[ -n $cuda_problem ]]; then
  result "(d) oracle on cuda: SKIP ($cuda_problem)"
else
  MOETRAIN="${mt[*]}" ORACLE_DEVICE=cuda PYTHON=$python limited 200 bash tests/oracle/run_oracle.sh
  passed=$(grep -c '^PASS' "$work/last") failed=$(grep -c '^FAIL' "$work/last")
  if ((failed == 0 && passed > 0)); then result "(d) oracle on cuda: PASS ($passed configurations)"
  else
    result "(d) oracle on cuda: FAIL ($failed failed: $(grep '^FAIL' "$work/last" | cut -d' ' -f3 | tr '\n' ' '))"
  fi
fi

fi
if want e; then
say ""; say "== (e) NCCL, one rank: nccl_test, every NcclComm call on a world of one"
limited 120 "${launch[@]}" "$bundle/nccl_test"
rc=$?
case $rc in
  0) result "(e) NCCL, one rank: PASS ($(grep -c '^PASS' "$work/last") checks)" ;;
  77) result "(e) NCCL, one rank: SKIP ($(tail -n 1 "$work/last"))" ;;
  *) result "(e) NCCL, one rank: FAIL (exit $rc; $(grep -c '^FAIL' "$work/last") failed: $(grep '^FAIL' "$work/last" |
       cut -d' ' -f2- | head -n 3 | tr '\n' ' ')$(tail -n 1 "$work/last"))" ;;
esac
# (b)'s cuda run again with every group an NCCL communicator (a lone rank otherwise stages, having nothing
# to send): the same losses.
if [[ ! -f ${runs:-$work}/cuda/log.h5 ]]; then
  result "(e) one-rank training over NCCL: SKIP (needs (b)'s cuda run)"
elif ! train cuda_nccl cuda 120 --set parallel.comm=nccl; then
  result "(e) one-rank training over NCCL: FAIL ($(tail -n 1 "$work/last"))"
elif ! grep -q 'comm     NCCL' "$work/last"; then
  result "(e) one-rank training over NCCL: FAIL (the banner does not say NCCL)"
elif tol=1e-5 compare_losses "$runs/cuda/log.h5" "$runs/cuda_nccl/log.h5" > "$work/cmp" 2>&1; then
  result "(e) one-rank training over NCCL: PASS (against the staged cuda run: $(cat "$work/cmp"))"
else
  result "(e) one-rank training over NCCL: FAIL ($(tail -n 1 "$work/cmp"))"
fi

fi
if want f; then
say ""; say "== (f) layouts on one GPU: tests/mpi/run_mpi_tests.sh's layout matrix, ranks sharing the GPU"
# Each case trains on one rank and on its layout's ranks, all on this GPU, their payloads staged through
# host memory (parallel.share_gpu), and compares losses and weights. Cases past the deadline are not run.
printf '#!/usr/bin/env bash\nexec %s "%s" "$@"\n' "${launch[*]}" "$bundle/moetrain" > "$work/moetrain"
chmod +x "$work/moetrain"
MOETRAIN=$work/moetrain MPIRUN=$bundle/mpi/mpirun MPI_MATRIX_ONLY=1 MPI_MATRIX_DEVICE=cuda \
  MPI_MATRIX_SET=parallel.share_gpu=true PYTHON=$python limited 540 bash tests/mpi/run_mpi_tests.sh
rc=$?
passed=$(grep -c '^PASS' "$work/last") failed=$(grep -c '^FAIL' "$work/last")
left=$(($(grep -c '^same "' tests/mpi/run_mpi_tests.sh) - passed - failed))
if ((failed > 0)); then
  result "(f) layouts on one GPU: FAIL ($failed of $((passed + failed)) failed: $(grep '^FAIL' "$work/last" |
    cut -d' ' -f2- | cut -d: -f1 | head -n 3 | tr '\n' ';')$( ((left > 0)) && echo " $left not reached"))"
elif ((passed == 0)); then result "(f) layouts on one GPU: FAIL (exit $rc, no case ran: $(tail -n 1 "$work/last"))"
elif ((left > 0)); then result "(f) layouts on one GPU: PASS for $passed cases; $left not reached by the deadline"
else result "(f) layouts on one GPU: PASS (all $passed cases)"
fi

fi
if want g; then
say ""; say "== (g) speed targets: a dense GPT-2-124M shape (MFU), DeepSeek-V3's layer shapes against PyTorch"
# llm.c trains GPT-2 124M at about 46-56% MFU on an H100; moetrain's dense model of that shape (SwiGLU sized to
# GPT-2's MLP parameters, RoPE, RMSNorm) is read against it.
speed g bench/gpt2-124m.toml 20
speed g bench/dsv3-layers.toml 10
fi
if want h; then
say ""; say "== (h) the largest micro-batch that fits, per recomputation mode, against the planner (configs/moe-1b.toml)"
# largest_fit MODE: the largest of 1, 2, 4, ... 64 sequences per micro-batch that trains 2 steps on cuda, and the
# largest the planner (moetrain's fp32 storage on an H100) says fits.
largest_fit() { local mode=$1 mb ours=0 planned=0 sets
  if [[ -n $no_gpu || -n $cuda_problem ]]; then result "(h) largest micro-batch, $mode: SKIP (${no_gpu:-$cuda_problem})"; return; fi
  if ! shards; then result "(h) largest micro-batch, $mode: SKIP (no token shards)"; return; fi
  for mb in 1 2 4 8 16 32 64; do
    sets=(--set training.micro_batch=$mb --set training.global_batch=$mb --set training.recompute=$mode
          --set data.train="$work/data/train_000000.bin" --set data.val="$work/data/val_000000.bin")
    if limited 60 "${mt[@]}" train configs/moe-1b.toml "${sets[@]}" --set precision.device=cuda --dry-run \
        --cluster configs/clusters/h100-superpod.toml && grep -q '^  memory .*: fits' "$work/last"; then planned=$mb; fi
    if ((ours == mb / 2 || mb == 1)) && limited 120 "${mt[@]}" train configs/moe-1b.toml "${sets[@]}" \
        --set precision.device=cuda --set training.steps=2 --set training.eval_every=0 --set checkpoint.every=0 \
        --set checkpoint.resume=never --set run.out_dir="$runs" --set run.name="fit_${mode}_$mb"; then ours=$mb; fi
  done
  result "(h) largest micro-batch, recompute=$mode: INFO (trains: $ours sequences of 512; the planner says: $planned)"
}
for mode in none selective full; do largest_fit $mode; done
fi
say ""; say "== summary ($((SECONDS)) s)"
for r in "${results[@]}"; do say "$r"; done
echo; echo "== tail of $report"; tail -n 25 "$report"
exit $status
