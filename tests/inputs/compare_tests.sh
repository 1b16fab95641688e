#!/usr/bin/env bash
# Comparable runs and the command line's edges: smoothing by steps, extending a finished run, inspect on a
# sweep, --profile on a finished run, one numbering of MoE layers, exit statuses. MOETRAIN picks the binary.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-./moetrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/expect.sh

# The command line: bad input exits 2 as everywhere else, not with CLI11's own statuses (105-109).
expect "no command: the usage, the commands, status 2" 2 "Subcommands:.*train .*error: no command given" -- \
  bash -c "$bin 2>&1 | tr '\n' ' '; exit \${PIPESTATUS[0]}"
expect "an unknown command is named" 2 "error: 'trian' is not a moetrain command" -- $bin trian x.toml
expect "a missing argument: status 2, the command named" 2 "error: train: experiment is required" -- $bin train
expect "a value an option refuses: status 2" 2 "error: sample: --tokens: 'x' is not a whole number" -- \
  $bin sample r --tokens x
expect "options that exclude each other: status 2" 2 "error: inspect: --json excludes --csv" -- \
  $bin inspect r --json --csv
expect "an unknown option: status 2" 2 "error: plot: .*--nope" -- $bin plot r --out o --nope
expect "--help still exits 0" 0 "Usage: .*plot" -- $bin plot --help

# Plot: the running mean's window is a number of steps, the same for every run of a chart, so two runs with the
# same losses over their common steps draw the same bold curve there.
py=${PYTHON:-.venv/bin/python}
for n in 60 150; do mkdir -p "$tmp/made-$n" && $py tests/inputs/made_up_run.py "$tmp/made-$n" $n; done
$bin plot "$tmp/made-60" "$tmp/made-150" --out "$tmp/plots" > /dev/null 2>&1
same_smooth_prefix() {  # the bold lines of two runs agree point for point over the shorter one
  python3 -c "
import re, sys
lines = re.findall(r'<polyline points=\"([^\"]*)\"[^>]*class=\"smooth\"', open(sys.argv[1]).read())
a, b = (l.split() for l in lines)
print('same' if len(lines) == 2 and len(a) == 60 and a == b[:60] else f'{len(lines)} lines, differ')" "$1"
}
expect "plot: runs sharing their losses draw the same running mean over their common steps" 0 "^same$" -- \
  same_smooth_prefix "$tmp/plots/loss.svg"
expect "plot: the note names the window, from the longest run by default" 0 "bold: running mean over 6 steps" -- \
  cat "$tmp/plots/loss.svg"
expect "plot --smooth sets the window" 0 "bold: running mean over 9 steps" -- bash -c \
  "$bin plot '$tmp/made-60' --out '$tmp/plots9' --smooth 9 >/dev/null && cat '$tmp/plots9/grad_norm.svg'"
expect "plot --smooth 1 draws every step alone" 0 "^0 a point per step$" -- bash -c \
  "$bin plot '$tmp/made-150' --out '$tmp/plots1' --smooth 1 >/dev/null &&
   echo \$(grep -c 'class=\"smooth\"' '$tmp/plots1/loss.svg') \$(grep -o 'a point per step' '$tmp/plots1/loss.svg')"
expect "plot --smooth: a negative window" 2 "error: plot: --smooth: -3 is out of range \(at least 0\)" -- \
  $bin plot "$tmp/made-60" --out "$tmp/plots" --smooth -3

# Extending a finished run: its cosine decay is over, so raising training.steps holds the final lr (the default),
# warms up again and decays a second time, or stops naming the choices of lr_schedule.extend; the lr never jumps
# back up the old cosine stretched to the new length.
for i in $(seq 1 30); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" training.steps=6 lr_schedule.warmup_steps=2 > "$tmp/ext.toml"
$bin train "$tmp/ext.toml" --set run.name='"ext"' > /dev/null 2>&1
for kind in refuse default constant rewarm constant-sliced rewarm-sliced; do cp -r "$tmp/runs/ext" "$tmp/runs/ext-$kind"; done
export py
lrs() {  # the logged lr of every step, one line
  $py -c "import h5py, sys; print(' '.join('%.4e' % x for x in h5py.File(sys.argv[1] + '/log.h5')['lr'][:]))" "$1"
}
expect "extending a finished decay stops, naming lr_schedule.extend and its choices" 2 \
  "ckpt/step_00000006 ends the cosine decay of this run \(steps 0 to 6, lr now 3.00e-04\), and training.steps = 10 \
\(--set training.steps=10\) adds steps after it: set lr_schedule.extend = \"constant\" .* or \"rewarm\"" -- \
  $bin train "$tmp/ext.toml" --set run.name='"ext-refuse"' --set training.steps=10 --set lr_schedule.extend='"refuse"'
export -f lrs
extend() {  # extend ext-$1 to 10 steps with lr_schedule.extend = $2, in one go or with a stop at step 8
  local more=(); [[ $1 == *sliced ]] && more=(--stop-after 8)
  $bin train "$tmp/ext.toml" --set run.name="\"ext-$1\"" --set training.steps=10 --set lr_schedule.extend="\"$2\"" \
    "${more[@]}" > "$tmp/ext-$1.out" 2>&1 || return
  if [[ $1 == *sliced ]]; then
    $bin train "$tmp/ext.toml" --set run.name="\"ext-$1\"" --set training.steps=10 --set lr_schedule.extend="\"$2\"" \
      >> "$tmp/ext-$1.out" 2>&1 || return
  fi
  lrs "$tmp/runs/ext-$1"
}
decay=$(lrs "$tmp/runs/ext")
held="$decay 3.0000e-04 3.0000e-04 3.0000e-04 3.0000e-04"
expect "raising training.steps of a finished run alone: the lr stays at its final value, no jump" 0 "^same$" -- \
  bash -c "$bin train '$tmp/ext.toml' --set run.name=ext-default --set training.steps=10 > /dev/null 2>&1;
           [[ \$(lrs '$tmp/runs/ext-default') == '$held' ]] && echo same || lrs '$tmp/runs/ext-default'"
expect "extend = \"constant\": the added steps hold the final lr" 0 "^same$" -- bash -c \
  "[[ '$(extend constant constant)' == '$held' ]] && echo same"
expect "extend = \"constant\": the banner says so" 0 "^  lr +held at 3.00e-04 after step 6 \(lr_schedule.extend" -- \
  cat "$tmp/ext-constant.out"
expect "extend = \"constant\": a resume within the added steps keeps holding it (the checkpoint records the decay)" \
  0 "^same$" -- bash -c "[[ '$(extend constant-sliced constant)' == '$held' ]] && echo same"
# A second warmup from 3e-4 to 3e-3 over 2 steps (as the first: 1.5e-3, 3e-3), then cosine down to 3e-4 at step 10.
warm="$decay 1.6500e-03 3.0000e-03 3.0000e-03 3.0000e-04"
expect "extend = \"rewarm\": a stated warmup from the final lr, then a second decay to the new end" 0 "^same$" -- \
  bash -c "[[ '$(extend rewarm rewarm)' == '$warm' ]] && echo same"
expect "extend = \"rewarm\": a resume within the second cycle keeps it" 0 "^same$" -- \
  bash -c "[[ '$(extend rewarm-sliced rewarm)' == '$warm' ]] && echo same"

# inspect on a sweep's folder compares its runs, as if each were named.
python3 tests/tiny_experiment.py "$tmp" > "$tmp/sweep_exp.toml"
cat > "$tmp/grid.toml" <<TOML
experiment = "$tmp/sweep_exp.toml"
[grid]
"optimizer.lr" = [1e-3, 3e-3]
[set]
"training.steps" = 2
TOML
$bin sweep "$tmp/grid.toml" > /dev/null 2>&1
expect "inspect on a sweep's folder: a row per run, with the key they differ in" 0 \
  "^run +optimizer.lr +status .*grid/lr=0.001 +0.001 +complete +2/2 .*grid/lr=0.003 +0.003 +complete +2/2 " -- \
  bash -c "$bin inspect '$tmp/runs/grid' | tr '\n' ' '"
expect "inspect on a sweep's folder compares what naming its runs compares" 0 "^same$" -- bash -c \
  "folder=\$($bin inspect '$tmp/runs/grid' --csv); named=\$($bin inspect '$tmp/runs/grid/lr=0.001' \
     '$tmp/runs/grid/lr=0.003' --csv); [[ -n \$folder && \$folder == \"\$named\" ]] && echo same"
expect "plot on a sweep's folder draws each of its runs, named as when named one by one" 0 "^same$" -- bash -c \
  "$bin plot '$tmp/runs/grid' --out '$tmp/plot_folder' > /dev/null && \
   $bin plot '$tmp/runs/grid/lr=0.001' '$tmp/runs/grid/lr=0.003' --out '$tmp/plot_named' > /dev/null && \
   grep -q 'lr=0.003' '$tmp/plot_folder/loss.svg' && cmp -s '$tmp/plot_folder/loss.svg' '$tmp/plot_named/loss.svg' && echo same"
expect "inspect: a folder without runs still says what to give" 2 "empty: neither a run nor a checkpoint directory" -- \
  bash -c "mkdir -p '$tmp/empty' && $bin inspect '$tmp/empty'"

# --profile on a finished run: nothing is left to train, so it stops saying how to time steps instead of an empty
# table; raising training.steps times the added steps.
expect "train --profile on a finished run says what to do" 2 \
  "error: --profile: .*runs/ext/ckpt/step_00000006 holds step 6 and this run trains to training.steps = 6: no step \
is left to time. Profile a run of its own, e.g. --set run.name=\"ext-profile\" --set training.steps=5" -- \
  $bin train "$tmp/ext.toml" --set run.name='"ext"' --profile
expect "train --profile at the --stop-after step says so too" 2 "this run stops at --stop-after 6" -- \
  $bin train "$tmp/ext.toml" --set run.name='"ext"' --profile --set training.steps=8 --stop-after 6
expect "train --profile on an extended run times the added steps" 0 "profile  per step, mean of 1 step\(s\)" -- \
  $bin train "$tmp/ext.toml" --set run.name='"ext-refuse"' --profile --set training.steps=8

# MoE layers: plot and inspect name them alike, by block index (the made-up model: block 0 dense, 1 and 2 MoE).
export bin tmp
layer_names() {  # the layer names inspect prints and both expert charts draw, one line each
  $bin inspect "$tmp/made-60" | grep -oE "^ +(block|MoE layer|MTP module) [0-9]+" | sed 's/^ *//' | tr '\n' ','; echo
  grep -oE ">(block|MoE layer|MTP module) [0-9]+<" "$tmp/plots/expert_load.svg" | tr -d '<>' | sort -u | tr '\n' ','
  echo
  grep -oE "(block|MoE layer|MTP module) [0-9]+</text>" "$tmp/plots/expert_bias.svg" | sed 's|</text>||' | sort -u |
    tr '\n' ','; echo
}
export -f layer_names
expect "MoE layers: inspect, expert_load.svg and expert_bias.svg all say block 1 and block 2" 0 "^same$" -- bash -c \
  "[[ \$(layer_names | sort -u) == 'block 1,block 2,' ]] && echo same || layer_names"
