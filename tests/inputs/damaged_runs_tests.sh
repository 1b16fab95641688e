#!/usr/bin/env bash
# Runs, logs and data shards that are missing, damaged or still being written: inspect, plot,
# sample, export and a resumed train give a clear error (exit 2) or a clear partial answer, within
# seconds, never a signal or a hang. A token shard truncated while a run reads it stops the run
# with an error naming the shard. MOETRAIN=path runs another binary.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-$PWD/moetrain}
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
live_pid=""
cleanup() {
  [[ -n $live_pid ]] && kill "$live_pid" 2>/dev/null && wait "$live_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

source tests/expect.sh

# A command that must end by itself within 20 s with status 0 or 2 (not a signal: 128 + N, nor a
# timeout: 124); prints nothing on success, else what went wrong.
settles() {
  local status
  timeout 20 "$@" > "$tmp/settles.out" 2>&1; status=$?
  [[ $status -eq 0 || $status -eq 2 ]] && return 0
  echo "exit $status from: ${*:1:3} ($(tail -c 200 "$tmp/settles.out"))"
}

# inspect, then plot on what inspect read (both load a log alike: plot draws what it accepts).
inspect_and_plot() {
  settles $bin inspect "$1"
  grep -q "^error:" "$tmp/settles.out" || settles $bin plot "$1" --out "$tmp/svg"
}

for i in $(seq 1 3000); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" run.name='"r"' > "$tmp/exp.toml"
if ! $bin train "$tmp/exp.toml" > "$tmp/r.out" 2>&1; then
  echo "FAIL the reference run failed"; tail -n 3 "$tmp/r.out"; exit 1
fi
run=$tmp/runs/r
log_bytes=$(stat -c %s "$run/log.h5")

# --- missing pieces: no run directory, a directory without a log, a checkpoint without rank files
expect "inspect: no run directory" 2 "nope: no such file or directory" -- $bin inspect "$tmp/nope"
expect "plot: no run directory" 2 "nope/log.h5: no such file" -- $bin plot "$tmp/nope" --out "$tmp/svg"
expect "sample: no run directory" 2 "nope: no complete checkpoint" -- $bin sample "$tmp/nope"
expect "export: no run directory" 2 "nope: no complete checkpoint" -- $bin export "$tmp/nope" --hf "$tmp/hf"
mkdir -p "$tmp/nolog"
expect "inspect: a directory without a log" 2 "nolog: neither a run nor a checkpoint directory" -- \
  $bin inspect "$tmp/nolog"
expect "plot: a directory without a log" 2 "nolog/log.h5: no such file" -- $bin plot "$tmp/nolog" --out "$tmp/svg"
mkdir -p "$tmp/norank/ckpt/step_00000004" && touch "$tmp/norank/ckpt/step_00000004/manifest.toml"
expect "inspect: a checkpoint without rank files" 2 "step_00000004: no rank_\*.h5 files" -- \
  $bin inspect "$tmp/norank/ckpt/step_00000004"
expect "sample: a checkpoint without rank files" 2 "rank_00000.h5: cannot read the run's configuration" -- \
  $bin sample "$tmp/norank"
expect "export: a checkpoint without rank files" 2 "rank_00000.h5: cannot read the run's configuration" -- \
  $bin export "$tmp/norank" --hf "$tmp/hf"

# --- one damaged byte: the superblock's checksum (bytes 44-47 of a version 2/3 superblock); "at once": 5 s
cp -r "$run" "$tmp/sb"
python3 -c "import sys; f = open(sys.argv[1], 'r+b'); b = f.read(45); f.seek(44); f.write(bytes([b[44] ^ 255]))" \
  "$tmp/sb/log.h5"
advice="the log is damaged; the checkpoints in .*sb/ckpt are separate files and not affected.*mv .*sb/log.h5 "
expect "inspect: a damaged superblock checksum, at once" 2 "metadata checksum.*$advice" -- \
  timeout 5 $bin inspect "$tmp/sb"
expect "plot: a damaged superblock checksum, at once" 2 "metadata checksum.*$advice" -- \
  timeout 5 $bin plot "$tmp/sb" --out "$tmp/svg"
expect "train: resuming beside a damaged log says to move it aside" 2 \
  "cannot read the log to keep its rows up to step 4: .*metadata checksum.*move it aside.*mv .*sb/log.h5 " -- \
  timeout 20 $bin train "$tmp/exp.toml" --set run.out_dir=\""$tmp"\" --set run.name='"sb"' --set training.steps=6
expect "sample: the checkpoints of a run with a damaged log" 0 "sample: [0-9]+ tokens in" -- \
  timeout 20 $bin sample "$tmp/sb" --tokens 3
mv "$tmp/sb/log.h5" "$tmp/sb/log.h5.damaged"
expect "train: with the damaged log moved aside the run resumes" 0 "done: 6 steps" -- \
  timeout 20 $bin train "$tmp/exp.toml" --set run.out_dir=\""$tmp"\" --set run.name='"sb"' --set training.steps=6

# --- odd shapes a damaged or foreign log may hold: nothing per step to divide by
if [[ -x $python ]] && $python -c "import h5py" 2>/dev/null; then
  for odd in zero-experts zero-ranks empty-phases flat-load no-rows; do
    mkdir -p "$tmp/odd-$odd" && $python tests/inputs/odd_log.py "$tmp/odd-$odd/log.h5" $odd
  done
  expect "inspect: a zero-length expert dimension" 2 "/moe/expert_load has shape \[4, 1, 0\]" -- \
    $bin inspect "$tmp/odd-zero-experts"
  expect "plot: a zero-length expert dimension" 2 "/moe/expert_load has shape \[4, 1, 0\]" -- \
    $bin plot "$tmp/odd-zero-experts" --out "$tmp/svg"
  expect "inspect: a zero-length rank dimension" 2 "/timing/rank_phases has shape \[4, 0, 7\]" -- \
    $bin inspect "$tmp/odd-zero-ranks"
  expect "inspect: an empty phases attribute" 2 "attribute \"phases\" of /timing/rank_phases names 0 phases" -- \
    $bin inspect "$tmp/odd-empty-phases"
  expect "plot: an empty phases attribute" 2 "attribute \"phases\" of /timing/rank_phases names 0 phases" -- \
    $bin plot "$tmp/odd-empty-phases" --out "$tmp/svg"
  expect "inspect: a log without rows or run facts, a partial answer" 0 \
    "params +0.001M total, \? active per token; \? MFLOP per token.*loss +no step logged yet" -- \
    bash -c "set -o pipefail; $bin inspect '$tmp/odd-no-rows' | tr '\n' ' '"
  expect "plot: a log without rows" 2 "nothing to plot: no step is logged yet" -- \
    $bin plot "$tmp/odd-no-rows" --out "$tmp/svg"
  expect "inspect: expert load without a layer dimension" 2 "/moe/expert_load has shape \[4, 4\]" -- \
    $bin inspect "$tmp/odd-flat-load"
else
  echo "SKIP odd log shapes (no h5py in $python)"
fi

# --- a log cut short at several offsets, and a few dozen with random bits flipped (seeded)
mkdir -p "$tmp/cut"
head -c 48 "$run/log.h5" > "$tmp/cut/log.h5"
expect "inspect: a log cut short, in a run without checkpoints" 2 \
  "cut/log.h5: .*truncated file: eof = 48.*the run has no checkpoints .*mv .*cut/log.h5 .*from the start" -- \
  $bin inspect "$tmp/cut"
problems=""
for at in 0 7 48 512 $((log_bytes / 3)) $((log_bytes / 2)) $((log_bytes - 100)) $((log_bytes - 1)); do
  head -c "$at" "$run/log.h5" > "$tmp/cut/log.h5"
  problems+=$(inspect_and_plot "$tmp/cut")
done
[[ -z $problems ]] && echo "PASS inspect, plot: a log truncated at 8 offsets" ||
  echo "FAIL inspect, plot: a log truncated at 8 offsets: $problems"
variants=24
python3 - "$run/log.h5" "$tmp/flip" "$variants" <<'EOF'
import os, random, sys
source = open(sys.argv[1], "rb").read()
for seed in range(1, int(sys.argv[3]) + 1):
    data, draw = bytearray(source), random.Random(seed)
    for _ in range(draw.randint(1, 4)):
        data[draw.randrange(len(data))] ^= 1 << draw.randrange(8)
    os.makedirs(f"{sys.argv[2]}/{seed}")
    open(f"{sys.argv[2]}/{seed}/log.h5", "wb").write(data)
EOF
problems=""
for seed in $(seq 1 $variants); do
  problems+=$(inspect_and_plot "$tmp/flip/$seed")
done
[[ -z $problems ]] && echo "PASS inspect, plot: $variants logs with random bits flipped" ||
  echo "FAIL inspect, plot: $variants logs with random bits flipped: $problems"

# --- a run being written: inspect, plot, sample and export read it while train runs (MLA: export
# writes transformers' DeepseekV3, whose MoE blocks run MLA)
$bin train "$tmp/exp.toml" --set run.name='"live"' --set training.steps=100000 --set checkpoint.every=5 \
  --set model.attention.kind='"mla"' > "$tmp/live.out" 2>&1 &
live_pid=$!
for _ in $(seq 1 200); do [[ -d $tmp/runs/live/ckpt/step_00000010 ]] && break; sleep 0.1; done
problems=""
for i in 1 2 3; do
  for cmd in "inspect $tmp/runs/live" "plot $tmp/runs/live --out $tmp/svg" "sample $tmp/runs/live --tokens 3" \
    "export $tmp/runs/live --hf $tmp/hf-live-$i"; do
    timeout 20 $bin $cmd > "$tmp/during.out" 2>&1 || problems+="$cmd: exit $? ($(tail -c 200 "$tmp/during.out")) "
  done
done
grep -q "status      running" <(timeout 20 $bin inspect "$tmp/runs/live") || problems+="inspect does not say running "
kill -0 "$live_pid" 2>/dev/null || problems+="the run ended before the reads were done "
[[ -z $problems ]] && echo "PASS inspect, plot, sample, export during a live train" ||
  echo "FAIL inspect, plot, sample, export during a live train: $problems"
kill "$live_pid" && wait "$live_pid"
live_pid=""

# --- a shard truncated while the run reads it (its pages past the new end would raise SIGBUS)
cp "$tmp/data/train_000000.bin" "$tmp/train.keep"
$bin train "$tmp/exp.toml" --set run.name='"cut"' --set training.steps=100000 --set training.eval_every=0 \
  --set checkpoint.every=10 > "$tmp/cut.out" 2>&1 &
live_pid=$!
for _ in $(seq 1 200); do [[ -d $tmp/runs/cut/ckpt/step_00000010 ]] && break; sleep 0.1; done
truncate -s 5000 "$tmp/data/train_000000.bin"
timeout 20 tail --pid="$live_pid" -f /dev/null || kill "$live_pid"  # a run that keeps going fails the case
wait "$live_pid"; status=$?
live_pid=""
expect "train: a shard truncated while it is read stops the run, naming the shard" 2 \
  "train_000000.bin: the shard is now 5000 bytes, but it held [0-9]+ when the run opened it.*newest checkpoint is \
.*step_[0-9]{8}: with the shard restored" \
  -- bash -c "cat '$tmp/cut.out'; exit $status"
mv "$tmp/train.keep" "$tmp/data/train_000000.bin"
