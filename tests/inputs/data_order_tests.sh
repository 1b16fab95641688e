#!/usr/bin/env bash
# The training order (data.shuffle) and the validation set (training.eval_sequences): what the banner
# and log.h5 say of them, the same validation loss for any micro-batch size and pipeline layout,
# refusals of validation sets that do not fit, and resumes across a change of order or from a
# config of an older moetrain.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-$PWD/moetrain}
python=${PYTHON:-.venv/bin/python}
source tests/expect.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"

for i in $(seq 1 60); do
  printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"
done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null  # 16 validation windows of 8 + 1 tokens

# exp NAME KEY=VALUE...: writes the tiny experiment of run NAME.
exp() {
  local name=$1; shift
  python3 tests/tiny_experiment.py "$tmp" run.name="\"$name\"" "$@" > "$tmp/$name.toml"
  echo "$tmp/$name.toml"
}
attr() {  # attr RUN NAME: an attribute of the run's log.h5
  $python -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs[sys.argv[2]].decode())" \
    "$tmp/runs/$1/log.h5" "$2"
}

# --- The banner and log.h5 state the order and how much of the stream the run reads.
expect "the banner states the shuffled order and the share of an epoch" 0 \
  "shuffled by sequence \(run.seed 7\); 4 steps read 128 tokens, 0.0516 of an epoch; validation: 2 sequences" -- \
  $bin train "$(exp banner run.seed=7)"
expect "log.h5 records the order" 0 "^shuffled by sequence \(run.seed 7\); 4 steps read 128 tokens" -- \
  attr banner data_order
expect "data.shuffle = false reads in file order" 0 "  in file order; 4 steps read 128 tokens" -- \
  $bin train "$(exp file_order data.shuffle=false)"

# --- Validation: the same sequences for every micro-batch size (a last micro-batch of 4 at 8) and layout.
$bin train "$(exp mb8 training.global_batch=8 training.micro_batch=8 training.eval_sequences=12)" > /dev/null 2>&1
$bin train "$(exp mb1 training.global_batch=8 training.micro_batch=1 training.eval_sequences=12)" > /dev/null 2>&1
$python tests/mpi/same_run.py "micro_batch 8 and 1: the same training and eval losses" \
  "$tmp/runs/mb8" "$tmp/runs/mb1" 4
e=$(exp pp training.global_batch=8 training.micro_batch=4 training.eval_sequences=10)
$bin train "$e" --set run.name='"pp1"' > /dev/null 2>&1
mpirun --oversubscribe $run_as_root -np 2 $bin train "$e" --set run.name='"pp2"' --set parallel.pp=2 \
  > "$tmp/pp2.out" 2>&1 || tail -n 5 "$tmp/pp2.out"
$python tests/mpi/same_run.py "pp=2 evaluates what one stage evaluates (a last micro-batch of 2)" \
  "$tmp/runs/pp1" "$tmp/runs/pp2" 4 2 pp=2
mpirun --oversubscribe $run_as_root -np 4 $bin train "$e" --set run.name='"pp2tp2"' --set parallel.pp=2 \
  --set parallel.tp=2 --set parallel.sequence_parallel=true > "$tmp/pp2tp2.out" 2>&1 || tail -n 5 "$tmp/pp2tp2.out"
$python tests/mpi/same_run.py "pp=2 x tp=2 with sequence parallelism: the same eval (a last micro-batch of 2)" \
  "$tmp/runs/pp1" "$tmp/runs/pp2tp2" 4 4 pp=2,tp=2,sequence_parallel=true

# --- Refusals.
e=$(exp refuse)
expect "eval_batches is refused with its replacement" 2 \
  "set training.eval_batches=3: training.eval_batches is no longer a key.*\
training.eval_sequences = 6 \(3 \* training.micro_batch 2\)" -- \
  $bin train "$e" --set training.eval_batches=3
sed -i 's/^eval_sequences = 2$/eval_batches = 5/' "$e"
expect "eval_batches in the file names its line" 2 \
  "refuse.toml:[0-9]+:1: training.eval_batches is no longer a key.*training.eval_sequences = 10 \(5 \*" -- \
  $bin train "$e"
expect "more validation sequences than windows are refused with the numbers" 2 \
  "training.eval_sequences = 17 but data.val .*132 tokens\) holds 16 windows of model.seq_len \+ 1 = 9 tokens: \
use at most 16" -- \
  $bin train "$(exp too_many training.eval_sequences=17)"
expect "a last validation micro-batch that tensor parallelism cannot split is refused" 2 \
  "training.eval_sequences = 3 leaves 1 for the last validation micro-batch, 9 tokens, which parallel.tp = 2 must \
divide.*use a multiple of training.micro_batch = 2" -- \
  $bin train "$(exp tp_split parallel.tp=2 model.seq_len=9 training.eval_sequences=3)"
expect "without evaluation the validation set is not checked" 0 "done: 4 steps" -- \
  $bin train "$(exp no_eval training.eval_every=0 training.eval_sequences=17)"
expect "all the validation windows are allowed" 0 "validation: 16 sequences" -- \
  $bin train "$(exp all_val training.eval_sequences=16)"

# --- Resumes: a change of order is allowed and recorded; an older moetrain's config resumes.
e=$(exp order checkpoint.every=2 data.shuffle=false)
$bin train "$e" --stop-after 2 > /dev/null 2>&1
expect "a resume may change data.shuffle, and says so" 0 "changed +step 2: data.shuffle false -> true" -- \
  $bin train "$e" --set data.shuffle=true
expect "log.h5 records the change in config_changes" 0 "step 2: data.shuffle false -> true" -- attr order config_changes
e=$(exp older checkpoint.every=2)
$bin train "$e" --stop-after 2 > /dev/null 2>&1
# The checkpoint and log as an older moetrain wrote them: eval_batches, and no data.shuffle.
for f in "$tmp"/runs/older/ckpt/step_00000002/rank_*.h5 "$tmp/runs/older/log.h5"; do
  $python -c "import h5py, numpy as np, sys
f = h5py.File(sys.argv[1], 'r+')
text = f.attrs['config_toml'].decode().replace('eval_sequences = 2', 'eval_batches = 1').replace('shuffle = true\n', '')
f.attrs['config_toml'] = np.bytes_(text.encode())  # fixed length, as moetrain writes it" "$f"
done
expect "inspect maps the older checkpoint's keys" 0 '"data.shuffle": false.*"training.eval_sequences": 2' -- \
  bash -c "$bin inspect --json $tmp/runs/older/ckpt/step_00000002 | grep -v eval_batches"
expect "sample loads the older checkpoint" 0 "step 2" -- $bin sample "$tmp/runs/older" --tokens 4
expect "an older checkpoint (eval_batches, no data.shuffle) resumes; its file order is the change" 0 \
  "changed +step 2: data.shuffle false -> true" -- $bin train "$e"
