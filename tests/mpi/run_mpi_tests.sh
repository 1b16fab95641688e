#!/usr/bin/env bash
# Multi-rank tests under mpirun: every Comm call, then data-parallel training against one rank.
# Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/../.."
bin=./moetrain
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"
mpi() { mpirun --oversubscribe $run_as_root -np "$@"; }

mpi 3 build/tests/comm_test

for i in $(seq 1 60); do printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null

# A small MoE; every case trains it 4 steps on one rank and on several, then compares.
base() {
  cat <<TOML
[run]
out_dir = "$tmp/runs"
[model]
d_model = 32
n_layers = 2
n_heads = 2
head_dim = 16
ffn_hidden = 64
seq_len = 16
[model.moe]
n_routed_experts = 4
expert_hidden = 16
top_k = 2
bias_update_speed = 0.01
[training]
steps = 4
global_batch = 8
micro_batch = 2
eval_every = 0
[data]
train = "$tmp/data/train_*.bin"
val = "$tmp/data/val_*.bin"
TOML
}
base > "$tmp/exp.toml"

# same NAME RANKS -- SETTINGS...: one rank against RANKS data-parallel ranks.
same() {
  local name=$1 ranks=$2; shift 3
  local sets=() s
  for s in "$@"; do sets+=(--set "$s"); done
  if ! $bin train "$tmp/exp.toml" "${sets[@]}" --set run.name="$name-1" > "$tmp/$name-1.out" 2>&1; then
    echo "FAIL $name: the one-rank run failed"; tail -n 3 "$tmp/$name-1.out"; return
  fi
  if ! mpi "$ranks" $bin train "$tmp/exp.toml" "${sets[@]}" --set run.name="$name-n" --set parallel.dp="$ranks" \
      > "$tmp/$name-n.out" 2>&1; then
    echo "FAIL $name: the $ranks-rank run failed"; tail -n 3 "$tmp/$name-n.out"; return
  fi
  "$python" tests/mpi/same_run.py "$name" "$tmp/runs/$name-1" "$tmp/runs/$name-n" 4
}
same "dp=2, aux-free bias, sequence balance loss" 2 -- model.moe.aux_loss=\"sequence\"
same "dp=2, global-batch balance loss" 2 -- model.moe.aux_loss=\"global_batch\" model.moe.aux_alpha=0.01
same "dp=4, MLA and MTP" 4 -- model.attention.kind=\"mla\" model.mtp.depth=1

expect_error() {
  local name=$1 pattern=$2; shift 2
  local out
  out=$("$@" 2>&1)
  if [[ $? -ne 0 ]] && grep -qE -- "$pattern" <<<"$out"; then echo "PASS $name"
  else echo "FAIL $name (output must match /$pattern/)"; echo "$out" | tail -n 3; fi
}
expect_error "more ranks than the layout" "parallel.dp \* tp \* pp = 1 ranks, but mpirun started 2: start it with \`mpirun -np 1" \
  mpi 2 $bin train "$tmp/exp.toml" --set run.name=wrong
expect_error "a layout without mpirun" "parallel.dp \* tp \* pp = 2 ranks, but this run has 1 \(no mpirun\)" \
  $bin train "$tmp/exp.toml" --set parallel.dp=2 --set run.name=wrong
expect_error "a batch that does not split over the ranks" "training.global_batch = 8 must be a multiple of parallel.dp \* training.micro_batch = 12" \
  $bin train "$tmp/exp.toml" --set parallel.dp=3 --set training.micro_batch=4 --set run.name=wrong
