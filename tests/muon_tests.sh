#!/usr/bin/env bash
# Muon (optimizer.kind = "muon") as a user runs it: a run stopped at step 3 and resumed to 6 ends
# with the checkpoint (weights, Muon's momentum in exp_avg, AdamW's moments) and losses of a straight
# run of 6, bit for bit; Muon moves the weights away from what AdamW makes. Layouts that cut matrices:
# tests/muon_layout_tests.sh and the MPI matrix.
set -u
cd "$(dirname "$0")/.." && source tests/expect.sh
bin=./moetrain tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 30); do printf 'muon document %d\n%%\n' "$i"; done > "$tmp/text"
$bin prepare --input "$tmp/text" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" optimizer.kind='"muon"' optimizer.muon.lr=0.02 training.steps=6 \
  training.eval_every=0 model.n_dense_layers=1 > "$tmp/exp.toml"

# same A B: the final checkpoints' every group, and the logged losses, bit for bit.
same() {
  local a=$tmp/runs/$1 b=$tmp/runs/$2 group
  for group in params buffers optim/exp_avg optim/exp_avg_sq; do
    h5diff -q "$a/ckpt/step_00000006/rank_00000.h5" "$b/ckpt/step_00000006/rank_00000.h5" "/$group" "/$group" ||
      { echo "/$group differs"; return 1; }
  done
  h5diff -q "$a/log.h5" "$b/log.h5" /loss /loss && echo "identical"
}

expect "muon: a straight run of 6 steps" 0 "done: 6 steps" -- $bin train "$tmp/exp.toml" --set run.name=straight
expect "muon: a run stopped after step 3" 0 "stopped" -- \
  $bin train "$tmp/exp.toml" --set run.name=resumed --stop-after 3
expect "muon: the stopped run resumes from step 3" 0 "resume +from .*step_00000003" -- \
  $bin train "$tmp/exp.toml" --set run.name=resumed
expect "muon: resumed = straight, momentum included" 0 "^identical$" -- same straight resumed
# Muon's matrices keep one buffer (exp_avg, exp_avg_sq zero); AdamW's parameters both moments.
moments() {
  .venv/bin/python - "$tmp/runs/straight/ckpt/step_00000006/rank_00000.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    m, v = f["optim/exp_avg"], f["optim/exp_avg_sq"]
    for name, muon in (("blocks.0.ffn.w_up", True), ("blocks.1.moe.experts.w_up", True), ("embedding", False),
                       ("final_norm", False)):
        if not np.abs(m[name][()]).max() > 0 or (np.abs(v[name][()]).max() > 0) == muon:
            sys.exit(f"{name}: exp_avg max {np.abs(m[name][()]).max()}, exp_avg_sq max {np.abs(v[name][()]).max()}")
print("muon's buffers alone")
PY
}
expect "muon: the momentum buffer is the checkpoint's exp_avg of its matrices" 0 "muon's buffers alone" -- moments
expect "adamw: the same run" 0 "done: 6 steps" -- \
  $bin train "$tmp/exp.toml" --set run.name=adamw --set optimizer.kind=adamw
muon_ckpt=$tmp/runs/straight/ckpt/step_00000006/rank_00000.h5
adamw_ckpt=$tmp/runs/adamw/ckpt/step_00000006/rank_00000.h5
expect "muon and adamw train different weights" 0 "^differ$" -- bash -c \
  "[[ -f $muon_ckpt && -f $adamw_ckpt ]] && ! h5diff -q $muon_ckpt $adamw_ckpt /params/blocks.0.ffn.w_up && echo differ"
