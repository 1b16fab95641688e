#!/usr/bin/env bash
# model.head_chunk_tokens: the output head and its loss run over chunks of a micro-batch's tokens.
# A micro-batch in one chunk trains bit for bit as the unchunked head; smaller chunks within
# float32 rounding of the head weight's gradient sums; a chunked step stays capture-safe, also
# under ZeRO-3, a pipeline and MTP; the planner counts one chunk's logits. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
bin=${MOETRAIN:-./moetrain}
py=.venv/bin/python
source tests/expect.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
two=(${MPIRUN:-mpirun} -q --oversubscribe -np 2)  # two ranks (as root mpirun wants it said)
[[ $(id -u) -eq 0 ]] && two+=(--allow-run-as-root)

seq 1 40 | sed 's/.*/a quick brown fox, fortune &\n%/' > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
# 16 rows a micro-batch (2 sequences of 8), MTP depth 1: two heads per micro-batch.
python3 tests/tiny_experiment.py "$tmp" model.mtp.depth=1 checkpoint.every=0 > "$tmp/exp.toml"

train() {  # NAME CHUNK [--set ...]: trains the tiny experiment as run NAME
  local name=$1 chunk=$2; shift 2
  $bin train "$tmp/exp.toml" --set run.name="\"$name\"" --set model.head_chunk_tokens="$chunk" "$@"
}
# compare A B BOUND: the largest difference of the final checkpoints' values, at most BOUND
# (0: bit for bit); the losses logged per step likewise.
compare() {
  "$py" - "$tmp/runs/$1" "$tmp/runs/$2" "$3" <<'PY'
import glob, sys
import h5py, numpy as np
a, b, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
def values(run):
    with h5py.File(sorted(glob.glob(run + "/ckpt/step_*/rank_00000.h5"))[-1]) as f:
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" else None)
    with h5py.File(run + "/log.h5") as f:
        for key in ("loss", "mtp_loss", "eval_loss"):
            if key in f: out["log/" + key] = f[key][()]
    return out
x, y = values(a), values(b)
assert x.keys() == y.keys() and any(k.startswith("params/") for k in x), sorted(x)
worst = max(float(np.max(np.abs(x[k] - y[k]), initial=0)) for k in x)
print(f"largest difference {worst:.3g} over {len(x)} datasets")
sys.exit(0 if worst <= bound else 1)
PY
}

expect "train: unchunked head" 0 "done: 4 steps" -- train whole 0
expect "train: one chunk of 16 rows" 0 "done: 4 steps" -- train one 16
expect "train: chunks of 5 rows (5, 5, 5, 1)" 0 "done: 4 steps" -- train parts 5
expect "one chunk trains bit for bit as the unchunked head" 0 "largest difference 0 " -- compare whole one 0
# After 4 AdamW steps at lr 3e-3 the weights move by ~1e-2; the chunked sums differ in their last bits.
expect "chunks of 5 train within float32 rounding of the unchunked head" 0 "largest difference" -- \
  compare whole parts 2e-6
expect "capture check: head in chunks of 5, MTP" 0 "capture check: .* ok" -- \
  train capture 5 --set training.steps=5 --set training.eval_every=0 --check-capture
expect "capture check: head in chunks of 5, ZeRO-3 over dp=2" 0 "capture check: .* ok" -- \
  "${two[@]}" $bin train "$tmp/exp.toml" --set run.name='"zero3"' --set model.head_chunk_tokens=5 --set parallel.dp=2 \
  --set parallel.zero=3 --set training.micro_batch=1 --set training.steps=5 --set training.eval_every=0 --check-capture
expect "capture check: head in chunks of 3, pp=2 zb-h1" 0 "capture check: .* ok" -- \
  "${two[@]}" $bin train "$tmp/exp.toml" --set run.name='"zbh1"' --set model.head_chunk_tokens=3 --set parallel.pp=2 \
  --set parallel.schedule='"zb-h1"' --set training.micro_batch=1 --set training.steps=5 --set training.eval_every=0 \
  --check-capture
# A memory setting, as training.micro_batch: a run may go on in other chunks.
expect "a run resumes with another chunk size" 0 "resume +from .*step_00000004 \(step 4\)" -- \
  train parts 3 --set training.steps=6
expect "a negative chunk is refused, naming the key" 2 "model.head_chunk_tokens must be in \[0, [0-9]+\], got -1" -- train bad -1
# GPT-2 124M's shape, 16 sequences of 1024 a micro-batch: 3.29 GB of logits whole, 0.82 GB in chunks of 4096.
plan() { $bin train bench/gpt2-124m.toml --dry-run --cluster configs/clusters/h100-superpod.toml "$@"; }
expect "planner: GPT-2 124M's activations with the whole micro-batch's logits" 0 "activations 9.98\)" -- \
  plan --set model.head_chunk_tokens=0
expect "planner: GPT-2 124M's activations with the default chunks of 4096 tokens" 0 "activations 6.82\)" -- plan
