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
