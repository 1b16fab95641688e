#!/usr/bin/env bash
# The optimizer inside `train --check-capture`'s compared region: from the third step on, the
# step's own part (the gradient sums, clipping, AdamW, the bias update, the prepared weights)
# repeats the step before's launches with the same arguments, though the learning rate, the bias
# corrections and the clipping change from step to step: they reach the ops through device memory.
# Under the strict CPU backend, tiny models. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
bin=${MOETRAIN:-./moetrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"
mpi() { ${MPIRUN:-mpirun} -q --oversubscribe $run_as_root -np "$@"; }

source tests/expect.sh

for i in $(seq 1 60); do printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null

small=(run.out_dir="\"$tmp/runs\"" data.train="\"$tmp/data/train_*.bin\"" data.val="\"$tmp/data/val_*.bin\""
       model.vocab_size=257 model.d_model=32 model.seq_len=16 model.ffn_hidden=64 model.n_heads=2
       model.attention.kv_lora_rank=8 model.attention.qk_nope_head_dim=8 model.attention.qk_rope_head_dim=8
       model.attention.v_head_dim=8 model.n_layers=3 model.n_dense_layers=1 model.moe.n_routed_experts=8
       model.moe.expert_hidden=16 training.steps=5 training.global_batch=4 training.micro_batch=2
       training.eval_every=0 checkpoint.every=0 checkpoint.final=false precision.device='"cpu-strict"')
sets() { for s in "${small[@]}" "$@"; do printf -- '--set\n%s\n' "$s"; done; }
ok() { echo "capture check: 3 step\(s\) after the first two compared on $1 rank\(s\): ok"; }
# The update's own launches among the compared ops: AdamW on every parameter, the norm, the bias update.
update_ops="compared after the passes \(gradient sums, update, bias update, prepared weights\): .*[0-9]+ adamw, .*[0-9]+ bias_update, .*1 sum_squares"

# check NAME RANKS PATTERN SETTINGS...: tiny.toml with --check-capture; every line of PATTERN (a
# regular expression each) must be in the output.
check() {
  local name=$1 ranks=$2 pattern=$3; shift 3
  mapfile -t args < <(sets run.name="\"$name\"" "$@")
  local out status
  out=$(mpi "$ranks" $bin train configs/tiny.toml "${args[@]}" --check-capture 2>&1); status=$?
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
$update_ops" training.grad_clip=$clip training.steps=8 run.name='"clipped"'
expect "capture of the update: the clipped run's norms straddle the clip" 0 "^ok$" -- \
  .venv/bin/python -c '
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
norms, clip = f["grad_norm"][2:], float(sys.argv[2])
assert (norms > clip).any() and (norms < clip).any(), norms
print("ok")' "$tmp/runs/clipped/log.h5" "$clip"
