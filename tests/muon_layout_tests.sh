#!/usr/bin/env bash
# Muon's checkpoints across layouts: one momentum buffer per matrix (exp_avg), written by global slice
# like AdamW's moments. A run saved under one layout that cuts matrices resumes under another, and its
# losses and final checkpoint (weights and momentum) equal a straight one-rank run within
# tests/mpi/same_run.py's bounds.
set -u
cd "$(dirname "$0")/.." && source tests/expect.sh
bin=./moetrain python=${PYTHON:-.venv/bin/python} tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"
mpi() { mpirun --oversubscribe $run_as_root -np "$@"; }
for i in $(seq 1 30); do printf 'muon layout document %d\n%%\n' "$i"; done > "$tmp/text"
$bin prepare --input "$tmp/text" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" optimizer.kind='"muon"' optimizer.muon.lr=0.02 model.n_dense_layers=1 \
  model.moe.aux_loss='"sequence"' > "$tmp/exp.toml"
$bin train "$tmp/exp.toml" --set run.name=straight > "$tmp/straight.out" 2>&1 || echo "FAIL the one-rank run"

# resumed NAME RANKS_A LAYOUT_A RANKS_B LAYOUT_B: steps 1-2 under A (keys of [parallel]), 3-4 under B.
resumed() {
  local name=$1 run=${1// /_} sets_a=() sets_b=() kv
  for kv in $3; do sets_a+=(--set "parallel.$kv"); done
  for kv in $5; do sets_b+=(--set "parallel.$kv"); done
  if ! mpi "$2" $bin train "$tmp/exp.toml" --set run.name="$run" "${sets_a[@]}" --stop-after 2 > "$tmp/a.out" 2>&1 ||
     ! mpi "$4" $bin train "$tmp/exp.toml" --set run.name="$run" "${sets_b[@]}" > "$tmp/b.out" 2>&1; then
    echo "FAIL $name: a run failed"; tail -n 3 "$tmp/a.out" "$tmp/b.out"; return
  fi
  grep -q "resume   from .*step_00000002" "$tmp/b.out" || { echo "FAIL $name: no resume from step 2"; return; }
  "$python" tests/mpi/same_run.py "$name" "$tmp/runs/straight" "$tmp/runs/$run" 4 "$4"
}
resumed "muon: ZeRO-1 on dp=2, resumed on one rank" 2 "dp=2 zero=1" 1 ""
resumed "muon: tp=2, resumed as ZeRO-3 on dp=2" 2 "tp=2" 2 "dp=2 zero=3"
resumed "muon: ZeRO-2 on dp=2 x ep=2, resumed as tp=2" 2 "dp=2 ep=2 zero=2" 2 "tp=2"

# Muon's matrices keep one buffer on the device: the optimizer's state (the moments, Muon's update and
# the iteration's scratch) is below AdamW's two moments per weight, though the tiny model is mostly
# embedding and head, which AdamW updates.
optimizer_mb() { sed -n 's/^memory: per rank.* optimizer \([0-9.]*\) MB.*/\1/p' "$1"; }
$bin train "$tmp/exp.toml" --set run.name=adamw --set optimizer.kind='"adamw"' > "$tmp/adamw.out" 2>&1
muon_mb=$(optimizer_mb "$tmp/straight.out") adamw_mb=$(optimizer_mb "$tmp/adamw.out")
expect "muon: one buffer per matrix, below AdamW's two moments ($muon_mb MB, AdamW $adamw_mb MB)" 0 "^fewer$" -- \
  awk -v m="$muon_mb" -v a="$adamw_mb" 'BEGIN { if (m > 0 && m < a) print "fewer" }'

# --profile names Muon's parts as rows: the iteration (newton_schulz), and under ZeRO-1 the gather and
# the scatter of the matrices' pieces, one batch per step (two calls); on one rank nothing is cut.
profile_row() { awk -v op="$1" '$1 == op && $2 > 0 && $3 > 0 && $4 + 0 <= 100 { print $1, $2 }' "$2"; }
mpi 2 $bin train "$tmp/exp.toml" --set run.name=profiled --set parallel.dp=2 --set parallel.zero=1 --profile \
  > "$tmp/profiled.out" 2>&1
$bin train "$tmp/exp.toml" --set run.name=profiled-1 --profile > "$tmp/profiled-1.out" 2>&1
expect "muon --profile: the Newton-Schulz iteration's row" 0 "^newton_schulz " -- profile_row newton_schulz \
  "$tmp/profiled.out"
expect "muon --profile: ZeRO-1's gather and scatter, two calls a step" 0 "^muon_gather_scatter 2.0$" -- \
  profile_row muon_gather_scatter "$tmp/profiled.out"
expect "muon --profile: no gather or scatter on one rank" 0 "^none$" -- \
  bash -c "grep -q muon_gather_scatter $tmp/profiled-1.out || echo none"
