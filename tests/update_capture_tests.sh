#!/usr/bin/env bash
# The optimizer inside `train --check-capture`'s compared region: from the third step on, the
# step's own part (the gradient sums, clipping, AdamW, the bias update, the prepared weights)
# repeats the step before's launches with the same arguments, though the learning rate, the bias
# corrections and the clipping change from step to step: they reach the ops through device memory.
# Under the strict CPU backend, tiny models. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
source tests/expect.sh
bin=${MOETRAIN:-./moetrain}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi_flags=(-q --oversubscribe)
if [[ $(id -u) -eq 0 ]]; then mpi_flags+=(--allow-run-as-root); fi

for i in $(seq 1 80); do printf 'line %d of a text about optimizers, %d words long\n%%\n' "$i" "$((i % 9 + 3))"; done \
  > "$work/text"
$bin prepare --input "$work/text" --out "$work/data" > /dev/null
ok() { echo "capture check: 3 step\(s\) after the first two compared on $1 rank\(s\): ok"; }
# The update's own launches among the compared ops: AdamW on every parameter, the norm, the bias update.
update_ops="compared after the passes \(gradient sums, update, bias update, prepared weights\): .*[0-9]+ adamw, .*[0-9]+ bias_update, .*1 sum_squares"

# check NAME RANKS PATTERN SETTINGS...: the tiny experiment (tests/tiny_experiment.py; 5 steps, a dense
# layer and two MoE layers) with --check-capture on RANKS ranks; every line of PATTERN (a
# regular expression each) must be in the output.
check() {
  local name=$1 ranks=$2 pattern=$3; shift 3
  cases=$((${cases:-0} + 1))
  python3 tests/tiny_experiment.py "$work" run.name="\"case$cases\"" training.steps=5 training.eval_every=0 \
    checkpoint.every=0 checkpoint.final=false model.n_layers=3 model.n_dense_layers=1 "$@" > "$work/case$cases.toml"
  local out status
  out=$(${MPIRUN:-mpirun} "${mpi_flags[@]}" -np "$ranks" $bin train "$work/case$cases.toml" \
        --check-capture 2>&1); status=$?
  local line missing=""
  while IFS= read -r line; do grep -qE -- "$line" <<<"$out" || missing="$line"; done <<<"$pattern"
  if [[ $status -eq 0 && -z $missing ]]; then echo "PASS capture of the update: $name"
  else
    echo "FAIL capture of the update: $name (exit $status; missing /$missing/)"
    echo "$out" | tail -n 8 | sed 's/^/    /'
  fi
}

# Warmup to step 3, then cosine decay: the learning rate differs in every compared step, and
# weight decay applies to the matrices.
check "a learning rate that changes every step, with weight decay" 1 "$(ok 1)
$update_ops" lr_schedule.warmup_steps=3 lr_schedule.kind='"cosine"' optimizer.weight_decay=0.1
# The bf16 GEMMs' weight copies are remade after every update, inside the region.
check "bf16 weight copies made after the update" 1 "$(ok 1)
$update_ops
[0-9]+ copy_columns" precision.matmul='"bf16"'
check "dp 2, ZeRO-2: the reduce-scatter in the passes, the update on the pieces, the all-gather after" 2 "$(ok 2)
$update_ops" parallel.dp=2 parallel.zero=2
check "tp 2 with sequence parallelism" 2 "$(ok 2)
$update_ops" parallel.tp=2 parallel.sequence_parallel=true
check "pp 2: each stage updates its own layers" 2 "$(ok 2)
$update_ops" parallel.pp=2 model.n_layers=4

# Clipping decided on the device: with the clip between the step norms, some compared steps clip and
# some do not, and their launches are the same. The log's norms (before clipping) show both happened.
clip=1.45
check "steps that clip and steps that do not launch the same ops" 1 \
  "capture check: 6 step\(s\) after the first two compared on 1 rank\(s\): ok
$update_ops" training.grad_clip=$clip training.steps=8
expect "capture of the update: the clipped run's norms straddle the clip" 0 "^ok$" -- \
  .venv/bin/python -c '
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
norms, clip = f["grad_norm"][2:], float(sys.argv[2])
assert (norms > clip).any() and (norms < clip).any(), norms
print("ok")' "$work/runs/case$cases/log.h5" "$clip"
