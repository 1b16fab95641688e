#!/usr/bin/env bash
# Faults that lose nothing: kill -9 at random moments, a full disk, damaged checkpoints, two runs
# in one directory, a diverging loss, a model too large for memory. Every case prints PASS, FAIL
# or SKIP. Nothing sleeps: kills and disk fills are triggered by the run's own output or by file
# events in its run directory (inotifywait). FAULT_SEED=N replays the kill moments of a run.
set -u
cd "$(dirname "$0")/../.."
bin=$PWD/moetrain
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
disk=$tmp/disk
cleanup() {
  mountpoint -q "$disk" && umount "$disk"
  rm -rf "$tmp"
}
trap cleanup EXIT

for i in $(seq 1 60); do printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null

# A tiny MoE that checkpoints every step: each run takes a fraction of a second.
steps=12
# precision.device = cpu: the same numbers on any machine; these tests are about files, not devices.
python3 tests/tiny_experiment.py "$tmp" run.name='"ref"' model.moe.bias_update_speed=0.01 training.steps=$steps training.eval_every=3 checkpoint.every=1 checkpoint.keep=2 log.every=1 precision.device='"cpu"' > "$tmp/exp.toml"
train=("$bin" train "$tmp/exp.toml")
"${train[@]}" > "$tmp/ref.out" 2>&1 || { echo "FAIL the uninterrupted reference run failed"; tail -n 3 "$tmp/ref.out"; exit 1; }

# The newest checkpoint directory of a run that has a manifest, or "".
newest_complete() {
  local d newest=""
  for d in "$1"/ckpt/step_????????; do [[ -f $d/manifest.toml ]] && newest=$d; done
  echo "$newest"
}

# kill_at_event DIR N OUT -- PROGRAM ARGS...: runs PROGRAM (output to OUT) and kills it with SIGKILL at
# the Nth file event (create, modify, delete, rename) under DIR, or lets it finish. Prints its
# exit status.
kill_at_event() {
  local dir=$1 n=$2 out=$3 line pid watcher status
  shift 4
  mkdir -p "$dir"
  exec 3< <(exec inotifywait -m -r -e modify,create,delete,moved_to,close_write --format '%e %w%f' "$dir" 2>&1)
  watcher=$!
  while IFS= read -r line <&3; do [[ $line == "Watches established." ]] && break; done
  "$@" > "$out" 2>&1 &
  pid=$!
  (head -n "$n" > /dev/null; kill -9 "$pid" 2> /dev/null) <&3 &
  wait "$pid"
  status=$?
  kill "$watcher" 2> /dev/null
  wait
  exec 3<&-
  echo "$status"
}

# 1. kill -9 at random moments. Chains of runs: each run is killed at a random file event of its
# run directory (so also while a checkpoint or the log is being written), then started again,
# until one finishes; every start must resume from the newest complete checkpoint, and every
# chain must end with the uninterrupted run's log rows and checkpoint, bit for bit.
kill_loop() {
  local name="kill -9 at random moments, then resume" seed=${FAULT_SEED:-$((RANDOM * 32768 + RANDOM))}
  local tries=0 chains=0 mid_checkpoint=0 mid_log=0 problems="" chain_dirs=() run newest status n
  if ! command -v inotifywait > /dev/null; then echo "SKIP $name: needs inotifywait (inotify-tools; scripts/deps.sh)"; return; fi
  RANDOM=$seed
  # A whole run makes about 100 file events per step; a kill lands within the first few steps.
  while ((tries < ${FAULT_KILLS:-60})); do
    run=$tmp/runs/chain$((++chains))
    chain_dirs+=("$run")
    while :; do
      newest=$(newest_complete "$run")
      n=$((RANDOM % 400 + 1))
      ((++tries))
      status=$(kill_at_event "$run" "$n" "$tmp/try.out" -- "${train[@]}" --set run.name="chain$chains")
      [[ $status -eq 0 ]] && break
      if [[ $status -ne 137 ]]; then
        problems+="  try $tries (event $n): exit $status: $(grep -m1 error "$tmp/try.out")"$'\n'
        break
      fi
      [[ -n $(compgen -G "$run/ckpt/step_*.tmp") ]] && ((++mid_checkpoint))
      [[ -e $run/log.h5.tmp ]] && ((++mid_log))
      if [[ -n $newest ]] && grep -q "^  resume " "$tmp/try.out" && ! grep -q "^  resume   from $newest (step" "$tmp/try.out"; then
        problems+="  try $tries (event $n): expected to resume from $newest: $(grep -m1 '^  resume' "$tmp/try.out")"$'\n'
      fi
      if grep -q "^warning\|^error" "$tmp/try.out"; then
        problems+="  try $tries (event $n): $(grep -m1 '^warning\|^error' "$tmp/try.out")"$'\n'
      fi
    done
    if [[ $status -eq 0 && -n $newest ]] && ! grep -q "^  resume   from $newest (step" "$tmp/try.out"; then
      problems+="  chain $chains: the last run did not resume from $newest"$'\n'
    fi
  done
  local check
  check=$("$python" tests/faults/same_as_reference.py "$tmp/runs/ref" "${chain_dirs[@]}" 2>&1) || problems+="$check"$'\n'
  if [[ -n $problems ]]; then
    echo "FAIL $name (FAULT_SEED=$seed):"
    echo -n "$problems" | grep -v "bit for bit" | head -n 10
  elif ((mid_checkpoint == 0)); then
    echo "FAIL $name (FAULT_SEED=$seed): none of $tries kills landed while a checkpoint was being written"
  else
    echo "PASS $name: $tries kills in $chains chains ($mid_checkpoint while a checkpoint was being written," \
      "$mid_log while log.h5 was being rewritten); each resumed from the newest complete checkpoint and ended" \
      "with the uninterrupted run's log and weights, bit for bit (FAULT_SEED=$seed)"
  fi
}
kill_loop

# Runs PROGRAM ARGS..., keeping its output in $out and its exit status in $status.
run() {
  out=$("$@" 2>&1)
  status=$?
}
# verdict NAME PROBLEM: PASS when PROBLEM is empty, else FAIL with it and the run's last lines.
verdict() {
  if [[ -z $2 ]]; then echo "PASS $1"; else echo "FAIL $1: $2"; echo "$out" | tail -n 4 | sed 's/^/    /'; fi
}
# The first of the patterns that the output does not match, or "".
unmatched() {
  local p
  for p in "$@"; do grep -qE -- "$p" <<< "$out" || { echo "output does not match /$p/"; return; }; done
}

# 2. A full disk, on a real small tmpfs. While a checkpoint is written: the run stops naming the
# file and saying the disk is full, the previous checkpoint stays the newest complete one, and
# once space is freed the run resumes from it and ends as the uninterrupted run does.
disk_full() {
  local name="a full disk while writing a checkpoint" name_log="a full disk while writing log.h5"
  mkdir -p "$disk"
  if ! mount -t tmpfs -o size=4m tmpfs "$disk" 2> /dev/null; then
    echo "SKIP $name: needs root to mount a tmpfs"
    echo "SKIP $name_log: needs root to mount a tmpfs"
    return
  fi
  local run=$disk/runs/full problem=""
  "${train[@]}" --set run.out_dir="$disk/runs" --set run.name=full --stop-after 2 > /dev/null 2>&1
  # Room for log.h5 to be rewritten and a step logged, not for a checkpoint (about 220 kB).
  fallocate -l $(($(df --output=avail -B1 "$disk" | tail -n 1) - 96 * 1024)) "$disk/filler"
  run "${train[@]}" --set run.out_dir="$disk/runs" --set run.name=full
  if ((status != 2)); then problem="exit $status, wanted 2"
  else problem=$(unmatched "^error: $run/ckpt/step_00000003.tmp/rank_00000.h5: cannot write the checkpoint: .*the disk is full \(No space left on device\)")
  fi
  [[ -z $problem && -e $run/ckpt/step_00000003 ]] && problem="$run/ckpt/step_00000003 exists"
  [[ -z $problem && -e $run/ckpt/step_00000003.tmp/manifest.toml ]] && problem="the unfinished checkpoint has a manifest"
  [[ -z $problem && $(newest_complete "$run") != "$run/ckpt/step_00000002" ]] && problem="the newest complete checkpoint is $(newest_complete "$run")"
  rm "$disk/filler"
  if [[ -z $problem ]]; then
    run "${train[@]}" --set run.out_dir="$disk/runs" --set run.name=full
    if ((status != 0)); then problem="the run with space freed: exit $status"
    else problem=$(unmatched "^  resume   from $run/ckpt/step_00000002 \(step 2\)")
    fi
    [[ -z $problem ]] && ! out=$("$python" tests/faults/same_as_reference.py "$tmp/runs/ref" "$run" 2>&1) && problem="$out"
  fi
  verdict "$name: the file named, exit 2, step 2 kept and resumed from once space is freed, bit for bit" "$problem"

  # While the log is appended to: a run without checkpoints fills the disk itself once it is
  # going (filled when its 5th step line appears).
  run=$disk/runs/full_log
  problem=""
  coproc LOGRUN { exec "${train[@]}" --set run.out_dir="$disk/runs" --set run.name=full_log --set training.steps=100000 \
                    --set checkpoint.every=0 2>&1; }
  local pid=$LOGRUN_PID line
  while IFS= read -r line <&"${LOGRUN[0]}"; do [[ $line == "step     5/"* ]] && break; done
  fallocate -l "$(df --output=avail -B1 "$disk" | tail -n 1)" "$disk/filler" 2> /dev/null
  dd if=/dev/zero of="$disk/filler2" bs=4096 2> /dev/null
  out=$(cat <&"${LOGRUN[0]}")
  wait "$pid"
  status=$?
  if ((status != 2)); then problem="exit $status, wanted 2"
  else problem=$(unmatched "^error: $run/log.h5: cannot log step [0-9]+: .*the disk is full \(No space left on device\)")
  fi
  if [[ -z $problem ]]; then
    local rows
    rows=$("$python" -c "
import h5py, sys
f = h5py.File('$run/log.h5', 'r', libver='latest', swmr=True)
s = list(f['step'][()])
print(len(s) if s == list(range(1, len(s) + 1)) and len(s) >= 5 else 'bad: %s' % s[:20])" 2>&1)
    [[ $rows =~ ^[0-9]+$ ]] || problem="log.h5 after the failure: $rows"
  fi
  rm -f "$disk/filler" "$disk/filler2"
  verdict "$name_log: the file named, exit 2, log.h5 readable with ${rows:-?} steps, each once" "$problem"
}
disk_full

# 3. A damaged newest checkpoint (a truncated rank file): named in a warning and passed over for
# the previous one with checkpoint.resume = "auto"; named in the error when asked for by path.
damaged() {
  local run=$tmp/runs/damaged problem=""
  "${train[@]}" --set run.name=damaged --stop-after 5 > /dev/null 2>&1
  truncate -s 3000 "$run/ckpt/step_00000005/rank_00000.h5"
  run "${train[@]}" --set run.name=damaged --set checkpoint.resume="$run/ckpt/step_00000005"
  if ((status != 2)); then problem="exit $status, wanted 2"
  else problem=$(unmatched "^error: $run/ckpt/step_00000005/rank_00000.h5: cannot be read: .*truncated file")
  fi
  verdict "a damaged checkpoint named by checkpoint.resume: exit 2, the file named" "$problem"
  run "${train[@]}" --set run.name=damaged
  if ((status != 0)); then problem="exit $status, wanted 0"
  else problem=$(unmatched "^warning: $run/ckpt/step_00000005/rank_00000.h5: cannot be read: .*truncated file.*; resuming from the previous complete checkpoint $run/ckpt/step_00000004 instead" \
                           "^  resume   from $run/ckpt/step_00000004 \(step 4\)")
  fi
  [[ -z $problem ]] && ! out=$("$python" tests/faults/same_as_reference.py "$tmp/runs/ref" "$run" 2>&1) && problem="$out"
  verdict "a damaged newest checkpoint: a warning names the file, the run resumes from the previous one and ends bit for bit" "$problem"
}
damaged

# 4. Two runs into one run directory: the second is refused, naming the first's pid and host;
# the first, killed with SIGKILL, leaves no lock that blocks its resume.
busy() {
  local run=$tmp/runs/busy problem="" pid line newest
  coproc FIRST { exec "${train[@]}" --set run.name=busy --set training.steps=100000 2>&1; }
  pid=$FIRST_PID
  while IFS= read -r line <&"${FIRST[0]}"; do [[ $line == step* ]] && break; done
  run "${train[@]}" --set run.name=busy --set training.steps=100000
  kill -9 "$pid"
  wait "$pid" 2> /dev/null
  if ((status != 2)); then problem="exit $status, wanted 2"
  else problem=$(unmatched "^error: $run: another moetrain run is writing this run directory: pid $pid on host $(hostname) holds $run/lock")
  fi
  verdict "a second run into a busy run directory is refused, naming the first's pid and host" "$problem"
  newest=$(newest_complete "$run")
  problem=""
  run "${train[@]}" --set run.name=busy --set training.steps=100000 --stop-after $((10#${newest##*_} + 1))
  if ((status != 0)); then problem="exit $status, wanted 0"
  else problem=$(unmatched "^  resume   from $newest ")
  fi
  verdict "a run killed with SIGKILL leaves no lock that blocks its resume" "$problem"

  if ! command -v mpirun > /dev/null; then echo "SKIP the lock of a multi-rank run: needs mpirun"; return; fi
  local as_root=""
  [[ $(id -u) -eq 0 ]] && as_root="--allow-run-as-root"
  run=$tmp/runs/busy2
  problem=""
  coproc JOB { exec mpirun --oversubscribe $as_root -np 2 "${train[@]}" --set run.name=busy2 --set parallel.dp=2 \
                 --set training.steps=100000 2>&1; }
  pid=$JOB_PID
  while IFS= read -r line <&"${JOB[0]}"; do [[ $line == step* ]] && break; done
  run "${train[@]}" --set run.name=busy2
  local holder
  holder=$(grep -oE "pid [0-9]+ on host" <<< "$out" | grep -oE "[0-9]+")
  if ((status != 2)); then problem="exit $status, wanted 2"
  elif [[ -z $holder ]] || ! tr '\0' '\n' < "/proc/$holder/environ" | grep -qx "OMPI_COMM_WORLD_RANK=0"; then
    problem="the holder named, pid '$holder', is not rank 0 of the job"
  fi
  kill -TERM "$pid"
  cat <&"${JOB[0]}" > /dev/null
  wait "$pid"
  verdict "a multi-rank run's lock is held by rank 0, and names it" "$problem"
}
busy

# 5. A loss or gradient norm that is not finite stops the run naming the step; nothing of that step
# is applied or saved, the newest checkpoint is from the step before and loads, and running
# again stops at the same step instead of training on.
diverge() {
  local run=$tmp/runs/diverge problem="" step
  run "${train[@]}" --set run.name=diverge --set optimizer.lr=1000
  step=$(grep -oE "^error: step [0-9]+" <<< "$out" | grep -oE "[0-9]+")
  if ((status != 2)) || [[ -z $step ]]; then problem="exit $status, wanted 2 and the step named"
  else problem=$(unmatched "^error: step $step: the (loss|gradient norm) is (-?nan|-?inf).*the newest checkpoint, $run/ckpt/step_0*$((step - 1)), is from before it")
  fi
  if [[ -z $problem ]]; then
    local check
    check=$("$python" -c "
import glob, h5py, numpy as np
last = max(d for d in glob.glob('$run/ckpt/step_*') if not d.endswith('.tmp'))
with h5py.File(last + '/rank_00000.h5', 'r') as f:
    arrays = []
    f.visititems(lambda n, o: arrays.append(o[()]) if isinstance(o, h5py.Dataset) else None)
    step = f.attrs['step']
log = h5py.File('$run/log.h5', 'r', libver='latest', swmr=True)
ok = step == $step - 1 and all(np.isfinite(a).all() for a in arrays) and np.isfinite(log['loss'][()]).all() \
     and list(log['step'][()]) == list(range(1, $step))
print('ok' if ok else 'checkpoint step %d, finite %s, log steps %s' % (step, [bool(np.isfinite(a).all()) for a in arrays], list(log['step'][()])))" 2>&1)
    [[ $check == ok ]] || problem="$check"
  fi
  if [[ -z $problem ]]; then
    run "${train[@]}" --set run.name=diverge --set optimizer.lr=1000
    ((status == 2)) || problem="running again: exit $status, wanted 2"
    [[ -z $problem ]] && problem=$(unmatched "^  resume   from $run/ckpt/step_0*$((step - 1)) " "^error: step $step: ")
  fi
  verdict "a loss that diverges stops at step ${step:-?}; the newest checkpoint is the step before, finite, and running again stops there again" "$problem"
}
diverge

# 6. A model far too large for memory is refused before anything is allocated, with the estimate.
too_large() {
  local problem=""
  run "${train[@]}" --set run.name=huge --set model.d_model=65536 --set model.n_layers=64 --set model.ffn_hidden=262144 \
    --set model.n_heads=512 --set model.head_dim=128
  if ((status != 2)); then problem="exit $status, wanted 2"
  else problem=$(unmatched "^error: $tmp/exp.toml: this run needs about [0-9.]+ GB of host memory but [0-9.]+ GB is available \(MemAvailable in /proc/meminfo\)")
  fi
  [[ -z $problem && -e $tmp/runs/huge ]] && problem="the run directory was made: it got past the check"
  verdict "a model far too large for memory is refused before allocating, with the estimate (exit 2)" "$problem"
}
too_large
