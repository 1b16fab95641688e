#!/usr/bin/env bash
# Experiment, grid and cluster files and command-line options at their edges: each is used as
# written or refused by name, with exit 2 (options too, naming their command), never read as
# empty, clamped, wrapped or crashed on.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-./moetrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/expect.sh

for i in $(seq 1 30); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" run.name='"inputs"' > "$tmp/exp.toml"
cluster=configs/clusters/h800-deepseek.toml

# Counts near 2^31 once overflowed the memory estimate and the parameter store (a negative
# estimate let the allocation through): the limit is named before anything is allocated.
# The address-space limit keeps a regression from taking the machine's memory.
shared="--set model.moe.n_shared_experts=2147483647"
expect "train: shared experts near 2^31" 2 \
  "$shared: model.moe.n_shared_experts = 2147483647 is out of range \(at most 1024\)" -- \
  timeout -k 5 60 bash -c "ulimit -v 4000000; $bin train $tmp/exp.toml $shared --set model.moe.top_k=1"
expect "train: routed experts near 2^31" 2 \
  "model.moe.n_routed_experts = 2147483640 is out of range \(at most 65536\)" -- \
  timeout -k 5 60 bash -c "ulimit -v 4000000; $bin train $tmp/exp.toml --set model.moe.n_routed_experts=2147483640"
expect "train: a global batch that would never end a step" 2 \
  "training.global_batch = 2147483640 is out of range \(at most 1048576\)" -- \
  timeout -k 5 60 $bin train "$tmp/exp.toml" --set training.global_batch=2147483640
expect "train: steps past 2^63 are out of range, not a string" 2 \
  "training.steps = 9223372036854775808 is out of range \(at most 1000000000\)" -- \
  $bin train "$tmp/exp.toml" --set training.steps=9223372036854775808
expect "keys: the limits are listed" 0 "\| \`training.global_batch\` \| integer \| in \[1, 1048576\] \|" -- $bin keys

# A directory opens as an empty file: every command that reads a TOML file refuses it.
expect "train: a directory as the experiment" 2 "$tmp/data: is a directory, not a file" -- \
  timeout -k 5 60 $bin train "$tmp/data"
expect "train --dry-run: a directory as the experiment" 2 "$tmp/data: is a directory, not a file" -- \
  $bin train "$tmp/data" --dry-run
expect "dump-step: a directory as the experiment" 2 "$tmp/data: is a directory, not a file" -- \
  $bin dump-step "$tmp/data" --out "$tmp/d.h5"
expect "plan: a directory as the experiment" 2 "$tmp/data: is a directory, not a file" -- \
  $bin plan "$tmp/data" --cluster $cluster
expect "plan: a directory as the cluster profile" 2 "$tmp/data: is a directory, not the cluster profile" -- \
  $bin plan "$tmp/exp.toml" --cluster "$tmp/data"
expect "sweep: a directory as the grid" 2 "$tmp/data: is a directory, not a file" -- $bin sweep "$tmp/data"
expect "plan-check: a directory as the runs file" 2 "$tmp/data: is a directory, not the runs file" -- \
  $bin plan-check "$tmp/data"

expect "--set of a section names the --set" 2 "^error: --set model=3: 'model' is a section; set a key inside it" -- \
  $bin train "$tmp/exp.toml" --set model=3

# sample's options at their edges, on a run of the tiny model.
$bin train "$tmp/exp.toml" > /dev/null 2>&1
run="$tmp/runs/inputs"
expect "sample: --tokens 0" 2 \
  "^error: sample: --tokens: 0 is out of range \(at least 1\)$" -- \
  $bin sample "$run" --tokens 0
expect "sample: --tokens past int" 2 "^error: sample: --tokens: 99999999999 is out of range \(at most 1048576\)$" -- \
  $bin sample "$run" --tokens 99999999999
expect "sample: --temperature nan" 2 "^error: sample: --temperature: 'nan' is not a finite number >= 0$" -- \
  $bin sample "$run" --temperature nan
expect "sample: --temperature -1" 2 "^error: sample: --temperature: '-1' is not a finite number >= 0$" -- \
  $bin sample "$run" --temperature -1
expect "sample: --top-k -1" 2 \
  "^error: sample: --top-k: -1 is out of range \(at least 0\)$" -- \
  $bin sample "$run" --top-k -1
expect "sample: --top-k above the vocabulary" 2 \
  "--top-k 100000 is more than the model's 257 tokens \(model.vocab_size\)" -- \
  $bin sample "$run" --top-k 100000
expect "sample: --seed -1 does not wrap" 2 \
  "^error: sample: --seed: '-1' is not a whole number in \[0, 18446744073709551615\]$" -- \
  $bin sample "$run" --seed -1
expect "sample: --seed past 64 bits is not clamped" 2 \
  "^error: sample: --seed: 99999999999999999999 is out of range \(at most 18446744073709551615\)$" -- \
  $bin sample "$run" --seed 99999999999999999999
expect "sample: the largest seed is used as given" 0 "seed 18446744073709551615" -- \
  $bin sample "$run" --tokens 2 --seed 18446744073709551615

# A model of 100 tokens trained on shards of ids below 100, without a tokenizer: sampling with
# byte-level tokens names the run and what does not fit.
python3 - "$tmp/small" <<'EOF'
import os, struct, sys
os.makedirs(sys.argv[1], exist_ok=True)
for name, n in (("train_000000.bin", 4096), ("val_000000.bin", 512)):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack(f"<{n}H", *[(i * 7) % 100 for i in range(n)]))
EOF
python3 tests/tiny_experiment.py "$tmp" run.name='"v100"' model.vocab_size=100 data.train="\"$tmp/small/train_*.bin\"" \
  data.val="\"$tmp/small/val_*.bin\"" > "$tmp/v100.toml"
$bin train "$tmp/v100.toml" > /dev/null 2>&1
expect "sample: a byte-level vocabulary larger than the model's" 2 \
  "runs/v100/ckpt/step_00000004: the byte-level tokenizer \(no tokenizer.bpe beside the run or its training shards\)\
 has a vocabulary of 257 tokens, more than the checkpoint's model.vocab_size = 100" -- \
  $bin sample "$tmp/runs/v100"

# plan's options at their edges.
expect "plan: --gpus 0" 2 "^error: plan: --gpus: 0 is out of range \(at least 1\)$" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --gpus 0
expect "plan: --gpus -8" 2 "^error: plan: --gpus: -8 is out of range \(at least 1\)$" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --gpus -8
expect "plan: --top 0" 2 "^error: plan: --top: 0 is out of range \(at least 1\)$" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --top 0
expect "plan: --max-cp 0" 2 "^error: plan: --max-cp: 0 is out of range \(at least 1\)$" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --max-cp 0
expect "plan: no layout fits the job, and why" 2 \
  "plan: no layout of 3 accelerators of .* can run this experiment: all data-parallel \(dp = 3\),\
 dp\*mbs = 3 does not divide the global batch of 4 sequences" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --gpus 3
expect "plan --json: no layout fits the job" 2 "no layout of 3 accelerators" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --gpus 3 --json
expect "train: --stop-after 0" 2 "^error: train: --stop-after: 0 is out of range \(at least 1\)$" -- \
  $bin train "$tmp/exp.toml" --stop-after 0

# Two grid values that differ only in characters a run name replaces.
cat > "$tmp/collide.toml" <<EOF
experiment = "$tmp/exp.toml"
[grid]
"data.val" = ["data/a b", "data/a_b"]
EOF
cat > "$tmp/collide2.toml" <<EOF
experiment = "$tmp/exp.toml"
[grid]
"training.steps" = [2, 3]
"optimizer.lr" = [1, 1.0]
EOF
expect "sweep: values that give the same run name" 2 \
  "collide2.toml:4:22: \[grid\] optimizer.lr values 1 \(at .*collide2.toml:4:19\) and 1.0 give runs the same\
 name part 'lr=1'" -- \
  $bin sweep "$tmp/collide2.toml"
expect "sweep: strings that give the same run name" 2 \
  "collide.toml:3:[0-9]+: \[grid\] data.val values \"data/a b\" \(at .*collide.toml:3:[0-9]+\) and \"data/a_b\"\
 give runs the same name part 'val=data_a_b' \(run names keep letters, digits and . _ \+ -" -- \
  $bin sweep "$tmp/collide.toml"

# Empty texts are not the option left out, and schedule's sizes are bounded before it simulates.
expect "sample: --device ''" 2 "^error: sample: --device: empty; expected auto, cpu, cuda or cpu-strict$" -- \
  $bin sample "$run" --device ''
expect "plan: --layout ''" 2 "^error: plan: --layout: empty; expected a layout" -- \
  $bin plan "$tmp/exp.toml" --cluster $cluster --layout ''
expect "train: --cluster ''" 2 "^error: train: --cluster: empty; expected a cluster profile$" -- \
  $bin train "$tmp/exp.toml" --dry-run --cluster ''
expect "schedule: --pp past its limit" 2 "^error: schedule: --pp: 99999999 is out of range \(at most 1024\)$" -- \
  timeout -k 5 20 $bin schedule --kind 1f1b --pp 99999999 --microbatches 4
expect "schedule: too many chunk passes to simulate" 2 \
  "schedule: --pp \* --vpp \* --microbatches = 2097152 chunk passes is out of range \(at most 262144\)" -- \
  timeout -k 5 20 $bin schedule --kind 1f1b --pp 512 --microbatches 4096
expect "schedule: an infinite cost" 2 "schedule: costs and latency must be non-negative finite numbers" -- \
  $bin schedule --kind 1f1b --pp 4 --microbatches 8 --cost-f inf

# A run name with a path in it wrote its run outside run.out_dir (or nested inside another run).
for name in "../escaped" "a/b" ".."; do
  expect "train: run.name = \"$name\" is refused" 2 "run.name = \"$name\" must name one folder under run.out_dir" -- \
    $bin train "$tmp/exp.toml" --set run.name="$name" --dry-run
done
