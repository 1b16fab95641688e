#!/usr/bin/env bash
# `moetrain plot` on real runs: a one-rank MoE run next to a second one, a dense run, a run of
# 4 ranks (dp=2 x pp=2) and a run still being written. Every SVG must be well-formed SVG 1.1,
# render with rsvg-convert to a PNG that is not blank, and hold what the log holds. One PASS,
# FAIL or SKIP line per case.
set -u
cd "$(dirname "$0")/.."
bin=./moetrain
check="python3 tests/plot_check.py"
tmp=$(mktemp -d)
bg=""
trap '[[ -n $bg ]] && kill "$bg" 2>/dev/null; rm -rf "$tmp"' EXIT

# case NAME COMMAND...: PASS when the command succeeds, else FAIL with its output.
case_() {
  local name=$1 out; shift
  if out=$("$@" 2>&1); then echo "PASS $name"; else echo "FAIL $name"; echo "$out" | tail -n 5 | sed 's/^/    /'; fi
}
# Rows of a dataset (default /step) in a run's log.h5.
steps_of() { h5dump -H -d "${2:-/step}" "$1/log.h5" | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p'; }
# want EXPECTED COMMAND...: the command prints EXPECTED.
want() {
  local expected=$1 got; shift
  got=$("$@" 2>&1)
  [[ $got == "$expected" ]] || { echo "$* printed '$got', wanted '$expected'"; return 1; }
}

for i in $(seq 1 40); do printf 'fortune number %d: plots %d\n%%\n' "$i" "$((i * 3))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" run.name='"one"' model.n_dense_layers=0 model.moe.bias_update_speed=0.01 training.steps=12 training.global_batch=8 training.eval_every=4 lr_schedule.warmup_steps=2 log.every=1 > "$tmp/exp.toml"
$bin train "$tmp/exp.toml" > "$tmp/one.log" 2>&1 || { echo "FAIL training run one"; tail -n 5 "$tmp/one.log"; }
$bin train "$tmp/exp.toml" --set run.name=two --set training.steps=7 --set optimizer.lr=1e-3 > "$tmp/two.log" 2>&1 ||
  { echo "FAIL training run two"; tail -n 5 "$tmp/two.log"; }
runs=$tmp/runs

# Two one-rank runs: every chart but the phases, which need several ranks.
$bin plot "$runs/one" "$runs/two" --out "$tmp/p1/new/dir" > "$tmp/p1.out" 2>&1
case_ "plot writes six charts into a new directory and skips phases.svg with the reason" bash -c "
  [[ \$(grep -c '^plot: wrote $tmp/p1/new/dir/' $tmp/p1.out) == 6 ]] &&
  grep -q '^plot: skipped phases.svg: every run has one rank' $tmp/p1.out && [[ ! -e $tmp/p1/new/dir/phases.svg ]]" \
  || cat "$tmp/p1.out"
p1=$tmp/p1/new/dir
svgs_ok() { for f in "$@"; do $check svg "$f" > /dev/null || { $check svg "$f"; return 1; }; done; }
case_ "every SVG is well-formed SVG 1.1 (size, viewBox, sans-serif, no scripts)" svgs_ok "$p1"/*.svg
case_ "loss.svg: a legend entry per run" bash -c "grep -q '>one</text>' $p1/loss.svg && grep -q '>two</text>' $p1/loss.svg"
case_ "loss.svg: a point per logged step in each run's line" \
  want "$(steps_of "$runs/one") $(steps_of "$runs/two")" $check points "$p1/loss.svg" raw
case_ "loss.svg: a dot per validation loss" \
  want $(($(steps_of "$runs/one" /eval/step) + $(steps_of "$runs/two" /eval/step))) $check count "$p1/loss.svg" circle eval
case_ "lr.svg, grad_norm.svg, tokens_per_s.svg: a point per step" bash -c "
  for f in lr grad_norm tokens_per_s; do
    [[ \$($check points $p1/\$f.svg raw) == '12 7' ]] || { echo \$f; exit 1; }; done"
case_ "expert_load.svg: a heatmap per run with both MoE layers (blocks 0 and 1)" want 4 bash -c \
  "grep -o '>block [01]<' $p1/expert_load.svg | wc -l"
case_ "expert_bias.svg: a line per expert of each layer and run" want 16 $check count "$p1/expert_bias.svg" polyline expert

if command -v rsvg-convert > /dev/null; then
  render() {
    local svg=$1; shift
    rsvg-convert "$svg" -o "${svg%.svg}.png" && $check png "${svg%.svg}.png" "$@"
  }
  # Run one's colour (the first of the palette) must be drawn, not just frames and text.
  case_ "loss.svg renders, with run one's lines" render "$p1/loss.svg" 31,119,180 200
  case_ "lr.svg renders, with run two's line" render "$p1/lr.svg" 255,127,14 200
  case_ "grad_norm.svg renders" render "$p1/grad_norm.svg" 31,119,180 100
  case_ "tokens_per_s.svg renders" render "$p1/tokens_per_s.svg" 31,119,180 100
  case_ "expert_load.svg renders a heatmap" render "$p1/expert_load.svg"
  case_ "expert_bias.svg renders" render "$p1/expert_bias.svg" 31,119,180 100
else
  echo "SKIP rendering the charts to PNG: rsvg-convert is missing (Debian package librsvg2-bin; scripts/deps.sh installs it)"
fi

# A dense model: the expert charts do not apply.
$bin train "$tmp/exp.toml" --set run.name=dense --set model.n_dense_layers=2 --set training.steps=2 > "$tmp/dense.log" 2>&1
case_ "a dense run: expert charts skipped with a note, the rest drawn" bash -c "
  $bin plot $runs/dense --out $tmp/p2 > $tmp/p2.out 2>&1 &&
  grep -q 'skipped expert_load.svg: no run has MoE layers' $tmp/p2.out &&
  grep -q 'skipped expert_bias.svg: no run has MoE layers' $tmp/p2.out &&
  [[ -f $tmp/p2/loss.svg && ! -e $tmp/p2/expert_load.svg ]]" || cat "$tmp/p2.out"

# Four ranks, data- and pipeline-parallel: phases.svg, a bar per rank.
if command -v mpirun > /dev/null; then
  root=""; [[ $(id -u) -eq 0 ]] && root="--allow-run-as-root"
  mpirun --oversubscribe $root -np 4 $bin train "$tmp/exp.toml" --set run.name=ranks4 --set parallel.dp=2 \
    --set parallel.pp=2 --set training.micro_batch=1 --set training.steps=4 --set precision.device=cpu > "$tmp/r4.log" 2>&1 ||
    { echo "FAIL training on 4 ranks"; tail -n 5 "$tmp/r4.log"; }
  $bin plot "$runs/ranks4" "$runs/one" --out "$tmp/p3" > "$tmp/p3.out" 2>&1
  case_ "4 ranks: phases.svg written, a stacked bar per rank, the one-rank run left out of it" bash -c "
    grep -q '^plot: wrote $tmp/p3/phases.svg' $tmp/p3.out &&
    [[ \$($check count $tmp/p3/phases.svg rect compute) == 4 ]] && grep -q '>ranks4</text>' $tmp/p3/phases.svg &&
    ! grep -q '>one</text>' $tmp/p3/phases.svg" || cat "$tmp/p3.out"
  case_ "4 ranks: the pipeline wait is drawn and named in the legend" bash -c "
    [[ \$($check count $tmp/p3/phases.svg rect pipeline_wait) -ge 1 ]] && grep -q '>pipeline wait (bubble)</text>' $tmp/p3/phases.svg"
  if command -v rsvg-convert > /dev/null; then
    # The bars' lengths are the measured times: on a loaded machine the waits grow and the compute
    # share shrinks (480 pixels were seen), so the check asks for visible bars, not a size.
    case_ "phases.svg renders, with compute bars" render "$tmp/p3/phases.svg" 78,121,167 100
  fi
else
  echo "SKIP plotting a run of several ranks: mpirun is missing (Debian package openmpi-bin)"
fi

# A run still being written: plotted between its steps, then stopped.
stdbuf -oL $bin train "$tmp/exp.toml" --set run.name=live --set training.steps=100000 --set precision.device=cpu \
  > "$tmp/live.log" 2>&1 &
bg=$!
# Waits for the second step line, which the trainer prints after the step's log row is flushed.
for _ in $(seq 1 3000); do
  grep -qE '^step +2/' "$tmp/live.log" && break
  kill -0 "$bg" 2>/dev/null || break
  sleep 0.1
done
case_ "a run being written: plotted while it trains, lines of the same length in every chart" bash -c "
  $bin plot $runs/live --out $tmp/p4 > $tmp/p4.out 2>&1 &&
  n=\$($check points $tmp/p4/loss.svg raw) && [[ \$n -ge 2 ]] &&
  [[ \$($check points $tmp/p4/lr.svg raw) == \$n && \$($check count $tmp/p4/expert_bias.svg polyline expert) == 8 ]] &&
  grep -q 'wrote $tmp/p4/expert_load.svg' $tmp/p4.out" || { cat "$tmp/p4.out"; tail -n 3 "$tmp/live.log"; }
kill -TERM "$bg" 2>/dev/null
wait "$bg"
status=$?
bg=""
case_ "the run being written stops on SIGTERM with its checkpoint (status 130)" want 130 echo "$status"

# Mistakes: exit 2 and a message naming the path (or the missing argument).
fails_with() {
  local want=$1 pattern=$2 out status; shift 2
  out=$("$@" 2>&1); status=$?
  [[ $status -eq $want ]] && grep -qE -- "$pattern" <<<"$out" && return 0
  echo "exit $status, wanted $want; output must match /$pattern/:"; echo "$out" | tail -n 3; return 1
}
expect_error() { local name=$1 pattern=$2 want=$3; shift 3; case_ "$name" fails_with "$want" "$pattern" "$@"; }
expect_error "plot: missing run directory" "$tmp/runs/nope/log.h5: no such file" 2 $bin plot "$runs/one" "$runs/nope" --out "$tmp/p5"
touch "$tmp/a_file"
expect_error "plot: --out below a file" "--out $tmp/a_file/charts: cannot create the directory .*give a writable directory" 2 \
  $bin plot "$runs/one" --out "$tmp/a_file/charts"
expect_error "plot: --out is a file" "--out $tmp/a_file: cannot create the directory" 2 $bin plot "$runs/one" --out "$tmp/a_file"
expect_error "plot: no run given" "runs is required" 2 $bin plot --out "$tmp/p6"
