#!/usr/bin/env bash
# Measured pipeline idle time of each schedule on CPU ranks, next to the schedule simulator's
# prediction. Every schedule trains the same model on PP ranks for STEPS steps; the idle time is
# the time each rank spent blocked on pipeline transfers (log.h5 /timing/rank_phases), as a
# fraction of the step, averaged over ranks; the median over the steps after the first two.
#   bash bench/pipeline_idle.sh [PP] [MICROBATCHES] [STEPS]
# Needs the demo data (`make run` prepares it).
set -euo pipefail
cd "$(dirname "$0")/.."
pp=${1:-2}
micro=${2:-8}
steps=${3:-30}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"
# One BLAS thread per rank: the ranks share the machine's cores.
export OPENBLAS_NUM_THREADS=1
layers=$((4 * pp))
printf '| schedule | measured idle | simulated idle (F=1, B=2) | compute per step (ms, mean over ranks) |\n|---|---|---|---|\n'
for kind in gpipe 1f1b interleaved zb-h1 dualpipe dualpipev; do
  vpp=1
  [[ $kind == interleaved ]] && vpp=2
  mpirun --oversubscribe $run_as_root --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS -np "$pp" \
    ./moetrain train configs/tiny.toml --set run.out_dir="$out" --set run.name="$kind-pp" --set training.steps="$steps" \
    --set training.global_batch="$micro" --set training.micro_batch=1 --set model.n_layers="$layers" \
    --set training.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never \
    --set parallel.pp="$pp" --set parallel.vpp="$vpp" --set parallel.schedule="\"$kind\"" > /dev/null
  ./moetrain schedule --kind "$kind" --pp "$pp" --microbatches "$micro" $([[ $vpp -gt 1 ]] && echo --vpp $vpp) --json \
    > "$out/$kind.json"
  .venv/bin/python bench/pipeline_idle.py "$kind" "$out/$kind-pp/log.h5" "$out/$kind.json"
done
echo
echo "pp=$pp, $micro micro-batches of 1 x 128 tokens, $layers layers of configs/tiny.toml, $steps steps; $(nproc) cores"
