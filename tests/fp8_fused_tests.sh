#!/usr/bin/env bash
# fp8.fused_codes: under FP8 matmuls RMSNorm and SwiGLU (forward and backward) and attention write the FP8 codes
# of the GEMM inputs they produce (the residual stream's gradient included, for the down and output projections'
# Dgrad), which the GEMMs read instead of quantizing again. The codes are the GEMMs' own bit
# for bit, so a run trains the same checkpoints and losses with the fusion on and off: dense FFNs,
# MLA with query compression and shared experts, K ragged against the 128-wide tiles, E5M2
# gradients, four blocks under selective recomputation (the blocks' input gradients take turns in two
# rooms), and tensor parallelism with sequence parallelism (whose gathered rows the GEMMs quantize)
# and without it under full recomputation. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
bin=${MOETRAIN:-./moetrain}
source tests/expect.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
two=(${MPIRUN:-mpirun} -q --oversubscribe -np 2)
[[ $(id -u) -eq 0 ]] && two+=(--allow-run-as-root)

seq 1 40 | sed 's/.*/a quick brown fox, fortune &\n%/' > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
# d_model 160 and hidden 200: two tiles along K, the second ragged.
python3 tests/tiny_experiment.py "$tmp" precision.matmul='"fp8"' model.d_model=160 model.ffn_hidden=200 \
  model.moe.expert_hidden=72 training.steps=3 checkpoint.every=0 > "$tmp/exp.toml"

launch=()  # what starts a run: nothing for one process, mpirun for several
# pair NAME [--set ...]: trains NAME-on and NAME-off (fused codes on, off) with the same overrides.
pair() {
  local name=$1; shift
  "${launch[@]}" $bin train "$tmp/exp.toml" --set run.name="\"$name-on\"" "$@" > "$tmp/$name-on.out" 2>&1 &&
    "${launch[@]}" $bin train "$tmp/exp.toml" --set run.name="\"$name-off\"" --set fp8.fused_codes=false "$@" \
      > "$tmp/$name-off.out" 2>&1 && echo "trained $name" || tail -n 5 "$tmp/$name-on.out" "$tmp/$name-off.out"
}
# same NAME: the final checkpoints' parameters, optimizer state and buffers, and the logged losses,
# bit for bit (the stored experiment text differs by the key).
same() {
  local on=$tmp/runs/$1-on off=$tmp/runs/$1-off ckpt
  ckpt=$(basename "$(ls -d "$on"/ckpt/step_* | tail -n 1)")
  for rank in "$on/ckpt/$ckpt"/rank_*.h5; do
    for group in $(h5ls "$rank" | awk '{print $1}'); do
      h5diff -q "$rank" "$off/ckpt/$ckpt/$(basename "$rank")" "/$group" "/$group" || return 1
    done
  done
  h5diff -q "$on/log.h5" "$off/log.h5" /loss /loss && echo "identical"
}

expect "train: dense FFNs, MHA" 0 "trained dense" -- pair dense --set model.n_dense_layers=2
expect "dense FFNs: the same bits with the norms' and SwiGLU's codes" 0 "identical" -- same dense
expect "train: MLA with query compression, shared experts, E5M2 gradients" 0 "trained mla" -- pair mla \
  --set model.attention.kind='"mla"' --set model.attention.q_lora_rank=48 --set model.attention.kv_lora_rank=136 \
  --set model.moe.n_shared_experts=1 --set model.n_dense_layers=1 --set fp8.formats='"e4m3_e5m2"'
expect "MLA and shared experts: the same bits with fused codes" 0 "identical" -- same mla
expect "train: four dense layers, selective recomputation" 0 "trained deep" -- pair deep --set model.n_layers=4 \
  --set model.n_dense_layers=4 --set training.recompute='"selective"'
expect "each block's input gradient with its codes for the block below: the same bits" 0 "identical" -- same deep
launch=("${two[@]}")
expect "train: tp=2 with sequence parallelism" 0 "trained tp" -- pair tp --set model.n_dense_layers=2 \
  --set parallel.tp=2 --set parallel.sequence_parallel=true
expect "tp=2, sequence parallel: the same bits with fused codes" 0 "identical" -- same tp
expect "train: tp=2, shared experts, full recomputation" 0 "trained tpr" -- pair tpr --set model.n_layers=3 \
  --set model.moe.n_shared_experts=1 --set parallel.tp=2 --set training.recompute='"full"'
expect "tp=2, full recomputation: the same bits with fused codes" 0 "identical" -- same tpr
