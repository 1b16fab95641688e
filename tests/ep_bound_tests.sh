#!/usr/bin/env bash
# parallel.ep_receive_bound: the room an expert-parallel rank keeps for the all-to-all's arrivals.
# A bound too small for the routing grows the arena with one warning and changes no loss (bit for
# bit against the default "worst"); bad values are refused naming the file and the key; the memory
# pre-check and `moetrain plan` say what the room costs. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/expect.sh
bin=${MOETRAIN:-./moetrain}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
as_root=()
[[ $(id -u) -eq 0 ]] && as_root=(--allow-run-as-root)
mpi() { ${MPIRUN:-mpirun} -q --oversubscribe "${as_root[@]}" -np "$@"; }

for i in $(seq 1 40); do
  printf 'saying %d: a rank receives what the routing sends, %d rows\n%%\n' "$i" "$((i * 3))"
done > "$work/sayings"
$bin prepare --input "$work/sayings" --out "$work/data" > /dev/null

# Two ranks, each holding 4 of 8 experts (top 2): the worst case is twice the average arrivals.
python3 tests/tiny_experiment.py "$work" parallel.dp=2 parallel.ep=2 model.moe.n_routed_experts=8 \
  model.moe.top_k=2 training.steps=3 training.eval_every=0 checkpoint.final=false > "$work/ep2.toml"
train() { mpi 2 $bin train "$work/ep2.toml" --set checkpoint.every=0 "$@"; }

out=$(train --set run.name='"worst"' 2>&1)
# "W warnings, D done": the warnings a run printed, and whether it finished its 3 steps.
tally() { echo "$(grep -c "^warning" <<<"$1") warnings, $(grep -c "^done: 3 steps" <<<"$1") done"; }
expect "default bound (worst): trains, no warning" 0 "^0 warnings, 1 done$" -- tally "$out"
out=$(train --set run.name='"tight"' --set parallel.ep_receive_bound=1 2>&1)
expect "bound 1: the arena grows once with a warning naming the key and the value" 0 \
  "more than parallel.ep_receive_bound = 1 reserves .*parallel.ep_receive_bound = [0-9.]+ would have held" -- \
  printf '%s\n' "$out"
expect "bound 1: one warning per rank at most, however many layers and steps grow" 0 "^[12] warnings, 1 done$" -- \
  tally "$out"
for d in /loss /aux_loss /mtp_loss /grad_norm /moe/expert_load; do
  expect "bound 1: $d bit for bit the default's" 0 "" -- \
    h5diff -q "$work/runs/worst/log.h5" "$work/runs/tight/log.h5" "$d" "$d"
done
out=$(train --set run.name='"roomy"' --set parallel.ep_receive_bound=8 2>&1)
expect "bound 8 (above the worst: the worst's room): no warning" 0 "^0 warnings, 1 done$" -- tally "$out"
expect "bound 8: loss bit for bit the default's" 0 "" -- \
  h5diff -q "$work/runs/worst/log.h5" "$work/runs/roomy/log.h5" /loss /loss

# Validation: the file (or --set) and the key, what is wrong and what would be right.
bad() {
  python3 tests/tiny_experiment.py "$work" parallel.ep_receive_bound="$2" > "$work/bad.toml"
  local why="parallel.ep_receive_bound must be \"worst\" \| a number >= 1, got"
  expect "refused: $1" 2 "bad.toml:[0-9]+:[0-9]+: $why" -- \
    $bin train "$work/bad.toml" --dry-run
}
bad "below the average" 0.5
bad "zero" 0
bad "another word" '"most"'
bad "a boolean" true
expect "refused from --set" 2 "parallel.ep_receive_bound must be \"worst\" \| a number >= 1, got -2" -- \
  $bin train "$work/ep2.toml" --dry-run --set parallel.ep_receive_bound=-2
expect "\"worst\" by --set, unquoted" 0 "ep_receive_bound = [\"']worst[\"']" -- \
  $bin train "$work/ep2.toml" --dry-run --set parallel.ep_receive_bound=worst

# Where memory is reported: the pre-check's arena term and the planner's table.
precheck() { MOETRAIN_MEMORY_AVAILABLE=1 mpi 2 $bin train "$work/ep2.toml"; }
expect "memory pre-check: the arrivals' room and its cost" 2 \
  "room for expert-parallel arrivals \(parallel.ep_receive_bound = worst\): [0-9.]+ GB over the average's" -- \
  precheck
expect "plan: the arrivals' room under moetrain's storage" 0 \
  "#1: mem holds the room for expert-parallel arrivals that parallel.ep_receive_bound = 1.5 reserves" -- \
  $bin plan configs/deepseek-v3-small.toml --cluster configs/clusters/h100-superpod.toml --gpus 8 \
  --set parallel.ep_receive_bound=1.5 --layout tp=1,pp=1,ep=8,schedule=1f1b,zero=1,mbs=1,recompute=none,storage=fp32
