#!/usr/bin/env bash
# Load balancing compared: the same experiment trained with each balance option, reporting the
# expert-load imbalance at the start and the end of training and the final loss.
#   bash bench/balance.sh [EXPERIMENT.toml] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
exp=${1:-configs/tiny.toml}
steps=${2:-300}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # run NAME --set ...
  local name=$1; shift
  ./moetrain train "$exp" --set run.out_dir="$out" --set run.name="$name" --set training.steps="$steps" \
    --set training.eval_every=0 --set checkpoint.every=0 --set checkpoint.resume=never "$@" >/dev/null
  printf '%-32s %s\n' "$name" "$(.venv/bin/python bench/expert_load.py "$out/$name/log.h5")"
}
run "no balancing" --set model.moe.bias_update_speed=0 --set model.moe.aux_loss=none
run "aux-free bias (gamma 0.001)" --set model.moe.bias_update_speed=0.001 --set model.moe.aux_loss=none
run "aux-free bias (gamma 0.01)" --set model.moe.bias_update_speed=0.01 --set model.moe.aux_loss=none
run "sequence aux (alpha 1e-4)" --set model.moe.bias_update_speed=0 --set model.moe.aux_loss=sequence
run "aux-free + sequence aux" --set model.moe.bias_update_speed=0.001 --set model.moe.aux_loss=sequence
run "micro-batch aux (alpha 0.01)" --set model.moe.bias_update_speed=0 --set model.moe.aux_loss=micro_batch --set model.moe.aux_alpha=0.01
run "global-batch aux (alpha 0.01)" --set model.moe.bias_update_speed=0 --set model.moe.aux_loss=global_batch --set model.moe.aux_alpha=0.01
echo "experiment: $exp, $steps steps; machine: $(nproc) cores"
