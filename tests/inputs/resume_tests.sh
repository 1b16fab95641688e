#!/usr/bin/env bash
# Resumes that continue exactly the run a checkpoint holds, or stop saying why: checkpoint folders
# that moetrain did not write, a changed model, a diverged run's advice, a stop under mpirun, and
# checkpoint attributes missing or of the wrong type.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-$PWD/moetrain}
python=${PYTHON:-.venv/bin/python}
source tests/expect.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for i in $(seq 1 60); do printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null

# exp NAME KEY=VALUE...: writes the tiny experiment of run NAME (CPU, a checkpoint every 2 steps).
exp() {
  local name=$1; shift
  python3 tests/tiny_experiment.py "$tmp" run.name="\"$name\"" checkpoint.every=2 checkpoint.keep=3 \
    precision.device='"cpu"' "$@" > "$tmp/$name.toml"
  echo "$tmp/$name.toml"
}

# --- Checkpoint folders: only step_<N> in moetrain's own format is a checkpoint.
e=$(exp names training.steps=4)
$bin train "$e" > /dev/null 2>&1
cp -r "$tmp/runs/names/ckpt/step_00000002" "$tmp/runs/names/ckpt/step_backup"
cp -r "$tmp/runs/names/ckpt/step_00000002" "$tmp/runs/names/ckpt/step_2"
expect "a step_backup folder is not the newest checkpoint" 0 "resume +from .*step_00000004 \(step 4\)" -- \
  $bin train "$e" --set training.steps=6 --set checkpoint.keep=2
expect "the rotation keeps the new checkpoint beside step_backup" 0 "step_00000006" -- ls "$tmp/runs/names/ckpt"
expect "log.h5 keeps every row after a resume beside step_backup" 0 "^6$" -- \
  $python -c "import h5py, sys; print(len(h5py.File(sys.argv[1], 'r')['loss']))" "$tmp/runs/names/log.h5"
expect "sample reads the newest real checkpoint" 0 "step 6" -- $bin sample "$tmp/runs/names" --tokens 4
expect "inspect does not list step_backup" 0 "^" -- bash -c "! $bin inspect $tmp/runs/names | grep -q backup"
cat > "$tmp/grid.toml" <<TOML
experiment = "$e"
[grid]
"optimizer.lr" = [1e-3]
[set]
"training.steps" = 2
"run.out_dir" = "$tmp/runs"
TOML
mkdir -p "$tmp/runs/grid/lr=0.001/ckpt/step_backup"
touch "$tmp/runs/grid/lr=0.001/ckpt/step_backup/manifest.toml"
expect "a sweep passes over a step_backup folder" 0 "1 of 1 runs complete" -- $bin sweep "$tmp/grid.toml"

# --- A changed model is refused by name; keys that may change are recorded in log.h5.
e=$(exp chg training.steps=4)
$bin train "$e" > /dev/null 2>&1
config_attr() {  # RUN ATTRIBUTE: a string attribute of the run's log.h5
  $python -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs.get(sys.argv[2], b'').decode())" \
    "$tmp/runs/$1/log.h5" "$2"
}
expect "resuming with another top_k is refused, naming both values" 2 \
  "step_00000004: cannot resume with a changed model .*model.moe.top_k = 3 \(--set model.moe.top_k=3\), the checkpoint's is 2.*new run.name" -- \
  $bin train "$e" --set training.steps=6 --set model.moe.top_k=3
expect "a refused resume leaves log.h5's config as it was" 0 "top_k = 2" -- config_attr chg config_toml
expect "every changed model key is named" 2 "model.rope_theta = 500 .*the checkpoint's is 10000; model.seq_len = 16 .*the checkpoint's is 8" -- \
  $bin train "$e" --set training.steps=6 --set model.seq_len=16 --set model.rope_theta=500.0
expect "another matmul precision is refused" 2 "precision.matmul = bf16 .*the checkpoint's is fp32" -- \
  $bin train "$e" --set training.steps=6 --set precision.matmul='"bf16"'
expect "another optimizer beta is refused" 2 "optimizer.beta2 = 0.99 .*the checkpoint's is 0.95" -- \
  $bin train "$e" --set training.steps=6 --set optimizer.beta2=0.99
e2=$(exp other training.steps=2 model.d_model=32)
$bin train "$e2" > /dev/null 2>&1
expect "a checkpoint of another model shape is refused by its keys" 2 "model.d_model = 16 .*the checkpoint's is 32" -- \
  $bin train "$e" --set run.name='"fresh"' --set checkpoint.resume="\"$tmp/runs/other/ckpt/step_00000002\""
expect "lr and steps may change on resume, and the change is shown" 0 \
  "changed  step 4: optimizer.lr 0.003 -> 0.001, training.steps 4 -> 6" -- \
  $bin train "$e" --set training.steps=6 --set optimizer.lr=0.001
expect "log.h5 records the change at the resumed step" 0 "^step 4: optimizer.lr 0.003 -> 0.001, training.steps 4 -> 6$" -- \
  config_attr chg config_changes
expect "a later resume adds its line to config_changes" 0 "training.steps 4 -> 6.step 6: training.steps 6 -> 8" -- \
  bash -c "$bin train $e --set training.steps=8 --set optimizer.lr=0.001 > /dev/null && $python -c \"import h5py; \
print(h5py.File('$tmp/runs/chg/log.h5', 'r').attrs['config_changes'].decode().replace(chr(10), '.'))\""
mpi=(mpirun --oversubscribe --allow-run-as-root -np 2)
"${mpi[@]}" $bin train "$e" --set training.steps=10 --set optimizer.lr=0.001 --set parallel.dp=2 > "$tmp/dp2.out" 2>&1
expect "a checkpoint of one rank resumes under two ranks (dp=2)" 0 \
  "resume +from .*step_00000008 \(step 8\); written under dp=1 " -- cat "$tmp/dp2.out"
expect "the new layout is recorded as a change" 0 "changed  step 8: parallel.dp 1 -> 2, training.steps 8 -> 10" -- \
  cat "$tmp/dp2.out"
expect "the run under two ranks trains to its end" 0 "^summary: run=chg steps=10 .*status=complete" -- cat "$tmp/dp2.out"

# --- Every checkpoint attribute is used exactly or refused: a copy of a good checkpoint, one
# thing changed with h5py, resumed from by name.
good=$tmp/runs/chg/ckpt/step_00000008
damage() {  # CASE PYTHON: copies the good checkpoint to bad/CASE and runs PYTHON on it (f: rank 0's file)
  local dir=$tmp/bad/$1/ckpt/step_00000008
  mkdir -p "$(dirname "$dir")" && cp -r "$good" "$dir"
  $python -c "import h5py, numpy as np, sys
f = h5py.File(sys.argv[1] + '/rank_00000.h5', 'r+')
$2" "$dir"
  echo "$dir"
}
resume_from() { $bin train "$e" --set run.name='"fresh"' --set training.steps=10 --set checkpoint.resume="\"$1\""; }
d=$(damage step_float "f.attrs['step'] = 8.0")
expect "a step attribute stored as a float is named" 2 "rank_00000.h5: cannot be read: HDF5: attribute step is not an integer" -- resume_from "$d"
d=$(damage no_samples "del f.attrs['samples_seen']")
expect "a missing samples_seen attribute is named" 2 "rank_00000.h5: cannot be read: .*attribute samples_seen" -- resume_from "$d"
d=$(damage step_pair "f.attrs['step'] = np.array([8, 8])")
expect "a step attribute of two values is named" 2 "attribute step holds 2 values, not one integer" -- resume_from "$d"
d=$(damage step_other "f.attrs['step'] = np.int64(6)")
expect "a rank file of another step is named" 2 "rank_00000.h5: attribute step = 6, but .*manifest.toml says 8" -- resume_from "$d"
d=$(damage rank_other "f.attrs['rank'] = np.int64(1)")
expect "a rank file in the wrong place is named" 2 "attribute rank = 1, but .*manifest.toml \(its place in files\) says 0" -- resume_from "$d"
d=$(damage layout_int "f.attrs['layout'] = np.int64(1)")
expect "a layout attribute that is not text is named" 2 "attribute layout is not a string" -- resume_from "$d"
d=$(damage split_far "d = f['params/embedding']; d.attrs['split_dim'] = np.int64(0); d.attrs['split_start'] = np.int64(5)")
expect "a split_start outside the parameter is named" 2 "params/embedding says its .* start at split_start 5, outside" -- resume_from "$d"
d=$(damage float64 "d = f['params/embedding']; a = dict(d.attrs); v = d[()]; del f['params/embedding']
n = f.create_dataset('params/embedding', data=v.astype(np.float64)); [n.attrs.__setitem__(k, x) for k, x in a.items()]")
expect "parameters stored as 64-bit floats are refused by name" 2 "params/embedding holds 64-bit floats; moetrain stores and reads 32-bit floats" -- resume_from "$d"
d=$(damage manifest_step "pass"); sed -i 's/^step = 8$/step = "8"/' "$d/manifest.toml"
expect "a manifest step that is not an integer is named" 2 "manifest.toml: damaged \(step must be an integer >= 0\)" -- resume_from "$d"
# A checkpoint of step 0 (as moetrain import writes) has computed nothing: any key may change, and
# loading refuses another shape.
zero=$tmp/zero/ckpt/step_00000000
mkdir -p "$(dirname "$zero")" && cp -r "$good" "$zero"
sed -i 's/^step = 8$/step = 0/; s/^samples_seen = .*/samples_seen = 0/' "$zero/manifest.toml"
$python -c "import h5py, numpy as np, sys
f = h5py.File(sys.argv[1] + '/rank_00000.h5', 'r+'); f.attrs['step'] = np.int64(0); f.attrs['samples_seen'] = np.int64(0)" "$zero"
expect "a step-0 checkpoint resumes with another seq_len and optimizer beta" 0 "resume +from .*step_00000000 \(step 0\)" -- \
  $bin train "$e" --set run.name='"from_zero"' --set training.steps=2 --set optimizer.beta2=0.99 --set model.seq_len=16 \
  --set checkpoint.resume="\"$zero\""
expect "a step-0 checkpoint of another shape is refused" 2 "step_00000000: does not fit this model .*has shape" -- \
  $bin train "$e" --set run.name='"from_zero2"' --set training.steps=2 --set model.d_model=32 --set checkpoint.resume="\"$zero\""
mkdir -p "$tmp/bad/renamed/ckpt" && cp -r "$good" "$tmp/bad/renamed/ckpt/step_00000006"
expect "a checkpoint under another step's name is named" 2 "step_00000006: holds step 8 .*not the step its name says" -- \
  resume_from "$tmp/bad/renamed/ckpt/step_00000006"

# --- A diverged run's advice leads back to weights from before the divergence: four healthy
# steps, then lr = 1000 until the loss is not finite; the advice (move the newer checkpoints
# aside, run again with the lower lr) must end in a loss as low as the healthy run's.
e=$(exp div training.steps=4 checkpoint.every=1 checkpoint.keep=20)
$bin train "$e" > "$tmp/div.out" 2>&1
healthy=$(grep -oE "final loss [0-9.]+" "$tmp/div.out" | grep -oE "[0-9.]+$")
$bin train "$e" --set training.steps=40 --set optimizer.lr=1000 > "$tmp/div.out" 2>&1
expect "the divergence message names the oldest checkpoint and how to continue from it" 0 \
  "To continue from the oldest kept, .*/step_00000001, move the newer ones .*\(mv .*/step_0+[0-9]+ .*\.diverged" -- \
  cat "$tmp/div.out"
moves=$(grep -oE "\(mv [^:]*:" "$tmp/div.out" | sed 's/^(//; s/:$//')
bash -c "$moves" 2> /dev/null
expect "following the advice resumes from before the divergence and trains as well as before" 0 "^ok$" -- \
  bash -c "out=\$($bin train $e --set training.steps=8 --set optimizer.lr=0.003 2>&1) || { echo \"\$out\"; exit 1; }
    grep -q 'resume   from .*step_00000001 ' <<<\"\$out\" || { echo \"\$out\"; exit 1; }
    loss=\$(grep -oE 'final loss [0-9.]+' <<<\"\$out\" | grep -oE '[0-9.]+\$')
    awk -v a=\$loss -v b=$healthy 'BEGIN { exit !(a <= b + 0.5) }' && echo ok || echo \"loss \$loss, healthy $healthy\""

# --- A stop under mpirun -np 2: SIGINT (Ctrl-C) or SIGUSR1 to mpirun itself ends with a
# checkpoint of the step reached. The signal goes at the first step line. Ctrl-C reaches the
# ranks as mpirun's SIGTERM one second later, and mpirun no longer reads their output by then:
# the notice (stderr) still comes, the closing lines may not, and the checkpoint must be there
# before mpirun's SIGKILL a second after that. SIGUSR1 leaves mpirun running: the closing line
# names the checkpoint.
stop_mpirun() {  # SIGNAL
  local run=stop_$1 pid i
  e=$(exp "$run" training.steps=100000 checkpoint.every=0 log.every=1 parallel.dp=2)
  "${mpi[@]}" $bin train "$e" > "$tmp/$run.out" 2>&1 &
  pid=$!
  for i in $(seq 1 600); do grep -q "^step " "$tmp/$run.out" && break; sleep 0.1; done
  kill -"$1" "$pid"
  for i in $(seq 1 600); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2> /dev/null
  wait "$pid"
}
stop_mpirun INT
expect "Ctrl-C to mpirun -np 2 stops with the notice and a complete checkpoint" 0 "^ok$" -- bash -c \
  "grep -q 'moetrain: stop requested: finishing the step in progress, then writing a checkpoint' $tmp/stop_INT.out \
   && ls $tmp/runs/stop_INT/ckpt/step_*/manifest.toml > /dev/null && echo ok || tail -n 5 $tmp/stop_INT.out"
stop_mpirun USR1
step=$(grep -oE "stopped by signal after step [0-9]+" "$tmp/stop_USR1.out" | grep -oE "[0-9]+$")
expect "SIGUSR1 to mpirun -np 2 stops with a message and a checkpoint" 0 "^ok$" -- bash -c \
  "grep -q 'moetrain: stop requested: finishing the step in progress, then writing a checkpoint' $tmp/stop_USR1.out \
   && [[ -n '$step' && -f $tmp/runs/stop_USR1/ckpt/step_$(printf %08d "${step:-0}")/manifest.toml ]] \
   && echo ok || tail -n 5 $tmp/stop_USR1.out"
