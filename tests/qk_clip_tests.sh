#!/usr/bin/env bash
# QK-Clip (optimizer.qk_clip) as a user runs it: log.h5 holds each attention layer's largest logit and
# heads clipped per step, with the largest logits at most tau from the second step on only where heads
# were clipped (the clip bounds the logits the next step starts from, not those its update makes); a run
# stopped and resumed keeps the rows and ends bit for bit as a straight run; ZeRO-3 is refused (exit 2).
set -u
cd "$(dirname "$0")/.." && source tests/expect.sh
bin=./moetrain tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'clip document %d\n%%\n' $(seq 1 30) > "$tmp/text"  # the format repeats for each number
$bin prepare --input "$tmp/text" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" optimizer.kind='"muon"' optimizer.qk_clip.enabled=true \
  optimizer.qk_clip.tau=0.5 model.init_std=0.3 model.mtp.depth=1 training.steps=4 training.eval_every=0 \
  > "$tmp/exp.toml"

expect "qk-clip: a straight run of 4 steps" 0 "done: 4 steps" -- $bin train "$tmp/exp.toml" --set run.name=straight
logged() {
  .venv/bin/python - "$tmp/runs/$1/log.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    m, c = np.array(f["attention/max_logit"]), np.array(f["attention/clipped_heads"])
if m.shape != (4, 3) or c.shape != (4, 3):  # 2 blocks and 1 MTP module, 4 steps
    sys.exit(f"shapes {m.shape} {c.shape}")
if not (np.all(m > 0) and c[0].sum() > 0 and np.all((c >= 0) & (c <= 2))):
    sys.exit(f"max_logit {m.tolist()} clipped {c.tolist()}")
print("logged", m.shape)
PY
}
expect "qk-clip: log.h5 has /attention/max_logit and clipped_heads per step and layer" 0 "^logged" -- \
  logged straight
expect "qk-clip: a run stopped after step 2" 0 "stopped" -- \
  $bin train "$tmp/exp.toml" --set run.name=resumed --stop-after 2
expect "qk-clip: the stopped run resumes from step 2" 0 "resume +from .*step_00000002" -- \
  $bin train "$tmp/exp.toml" --set run.name=resumed
same() {
  h5diff -q "$tmp/runs/straight/ckpt/step_00000004/rank_00000.h5" "$tmp/runs/resumed/ckpt/step_00000004/rank_00000.h5" \
    /params /params || return 1
  for d in /loss /attention/max_logit /attention/clipped_heads; do
    h5diff -q "$tmp/runs/straight/log.h5" "$tmp/runs/resumed/log.h5" $d $d || { echo "$d differs"; return 1; }
  done
  echo identical
}
expect "qk-clip: resumed = straight, the log's rows kept" 0 "^identical$" -- same
expect "qk-clip: ZeRO-3 refused, naming the key" 2 "parallel.zero = 3 keeps only pieces" -- \
  $bin train "$tmp/exp.toml" --set run.name=z3 --set optimizer.kind=\"adamw\" --set parallel.dp=2 --set parallel.zero=3
