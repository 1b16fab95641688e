#!/usr/bin/env bash
# The planner's gradients per rank (`train --dry-run --cluster`) against what a run on CPU ranks
# holds (its closing `memory:` line): the gradients themselves and the optimizer's buffers for
# summing them across ranks (data-parallel without ZeRO, tensor-parallel partial sums, DualPipe's
# mirror pair, the tied embedding, the experts' replicas). Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.." || exit 1
bin=${MOETRAIN:-./moetrain}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$([[ $(id -u) -eq 0 ]] && echo --allow-run-as-root)

seq 1 60 | sed 's/.*/line &: a gradient summed across ranks\n%/' > "$work/sayings"
$bin prepare --input "$work/sayings" --out "$work/data" > /dev/null

# Wide enough that the gradients are megabytes (the dry run prints tenths of one).
python3 tests/tiny_experiment.py "$work" model.d_model=128 model.head_dim=64 model.ffn_hidden=256 \
  model.moe.expert_hidden=128 model.moe.n_shared_experts=1 training.steps=1 training.eval_every=0 \
  checkpoint.final=false checkpoint.every=0 > "$work/exp.toml"

# "measured M planned P": the gradients' MB of a run on `ranks` ranks and of its dry run.
gradients() {
  local ranks=$1 name=$2; shift 2
  local ran planned
  ran=$(${MPIRUN:-mpirun} -q --oversubscribe $root -np "$ranks" \
          $bin train "$work/exp.toml" --set run.name="\"$name\"" "$@" 2>&1 |
        sed -n 's/^memory: per rank.*gradients \([0-9.]*\) MB.*/\1/p')
  planned=$($bin train "$work/exp.toml" "$@" --dry-run --cluster configs/clusters/h100-superpod.toml 2>&1 |
            sed -n 's/^  memory .*gradients \([0-9.]*\),.*/\1/p')
  echo "measured ${ran:-none} planned ${planned:-none}"
}
# Within the dry run's printed tenth of a MB.
close() {
  awk -v m="$2" -v p="$4" 'BEGIN { d = m - p; exit !(m != "none" && p != "none" && d < 0.051 && d > -0.051) }'
}

check() {
  local name=$1 ranks=$2; shift 2
  local got
  got=$(gradients "$ranks" "$name" "$@")
  # shellcheck disable=SC2086
  if close $got; then echo "PASS $name: gradients as planned ($got)"; else echo "FAIL $name: $got"; fi
}

check "dp=2 without ZeRO: the dense gradients' all-reduce buffer, the experts' replicas" 2 \
  --set parallel.dp=2 --set parallel.zero=0
check "tp=2 with sp: the partial sums' buffer, the experts' replicas" 2 \
  --set parallel.tp=2 --set parallel.sequence_parallel=true
check "pp=2 DualPipe: the mirror pair's buffer" 2 \
  --set parallel.pp=2 --set parallel.schedule='"dualpipe"' --set training.micro_batch=1
check "pp=2 1F1B with MTP: the tied embedding's buffer" 2 \
  --set parallel.pp=2 --set model.mtp.depth=1
