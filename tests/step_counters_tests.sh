#!/usr/bin/env bash
# A step after the first, of every shipped config (shrunk) and of multi-rank layouts, under the
# strict CPU backend with `train --check-capture`: the same device ops with the same sizes and
# pointers as the step before, and no download, host sync or allocation inside the step before
# its scalars are read, nor inside any pass of a micro-batch (what a CUDA graph's replay needs).
# Expert parallelism (ep > 1) may download the per-layer expert counts that size its all-to-all:
# as many every step, stated below. Each case prints PASS or FAIL.
set -u
cd "$(dirname "$0")/.."
bin=${MOETRAIN:-./moetrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"
mpi() { ${MPIRUN:-mpirun} -q --oversubscribe $run_as_root -np "$@"; }

source tests/expect.sh

for i in $(seq 1 60); do printf 'fortune number %d: the quick brown fox %d\n%%\n' "$i" "$((i * 7))"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null

# Every config at a few thousand parameters: its attention, MoE, MTP and precision choices kept.
small=(run.out_dir="\"$tmp/runs\"" data.train="\"$tmp/data/train_*.bin\"" data.val="\"$tmp/data/val_*.bin\""
       model.vocab_size=257 model.d_model=32 model.seq_len=16 model.ffn_hidden=64
       training.steps=5 training.global_batch=4 training.micro_batch=2 training.eval_every=0
       checkpoint.every=0 checkpoint.final=false precision.device='"cpu-strict"')
mla=(model.n_heads=2 model.attention.kv_lora_rank=8 model.attention.qk_nope_head_dim=8
     model.attention.qk_rope_head_dim=8 model.attention.v_head_dim=8)
moe=(model.n_layers=3 model.n_dense_layers=1 model.moe.n_routed_experts=8 model.moe.expert_hidden=16)
mha=(model.n_heads=2 model.head_dim=16)

sets() { for s in "${small[@]}" "$@"; do printf -- '--set\n%s\n' "$s"; done; }
ok="capture check: 3 step\(s\) after the first two compared on 1 rank\(s\): ok"

# check NAME CONFIG SETTINGS...: one rank.
check() {
  local name=$1 config=$2; shift 2
  mapfile -t args < <(sets run.name="\"$name\"" "$@")
  expect "capture check: $name" 0 "$ok" -- $bin train "$config" "${args[@]}" --check-capture
}

# The counters themselves: printed by --profile, logged per step (the same launches every step after
# the first: nothing in the step depends on the data but the MoE's row counts, not its op count).
mapfile -t args < <(sets run.name='"logged"' "${mla[@]}" "${moe[@]}")
expect "--profile prints the counters of the first and the later steps" 0 \
  "counters  per step on the first rank's device: the first step, then the mean of 4 later step\(s\)" -- \
  $bin train configs/tiny.toml "${args[@]}" --profile
expect "log.h5 holds every step's counters and op launches, the launches the same after the first step" 0 "^ok$" -- \
  .venv/bin/python -c '
import sys, h5py
f = h5py.File(sys.argv[1], "r", libver="latest", swmr=True)
c, k = f["counters/step"][:], f["counters/op_launches"][:]
fields = f["counters/step"].attrs["fields"].decode().split(",")
kinds = f["counters/op_launches"].attrs["kinds"].decode().split(",")
assert c.shape == (5, len(fields)) and k.shape == (5, len(kinds)), (c.shape, k.shape)
assert (c[:, fields.index("op_launches")] == k.sum(axis=1)).all() and k.min() >= 0
assert (k[1:] == k[1]).all() and c[1, fields.index("op_launches")] > 0
assert kinds[0] == "gemm" and kinds[-1] == "graph_launch"
print("ok")' "$tmp/runs/logged/log.h5"
expect "training.cuda_graph on the CPU is refused, naming the device" 2 \
  "training.cuda_graph = true captures CUDA graphs and needs precision.device = \"cuda\"" -- \
  $bin train configs/tiny.toml "${args[@]}" --set training.cuda_graph=true --dry-run
expect "training.cuda_graph under expert parallelism is refused, saying why" 2 \
  "cannot go with parallel.ep = 2: each MoE layer's all-to-all is sized by expert counts read on the host" -- \
  $bin train configs/tiny.toml "${args[@]}" --set training.cuda_graph=true --set precision.device='"cuda"' \
  --set parallel.dp=2 --set parallel.ep=2 --dry-run
expect "training.cuda_graph with tensor parallelism needs NCCL" 2 "set parallel.comm = \"nccl\"" -- \
  $bin train configs/tiny.toml "${args[@]}" --set training.cuda_graph=true --set precision.device='"cuda"' \
  --set parallel.tp=2 --dry-run
expect "training.cuda_graph with ZeRO-2 over data-parallel ranks needs NCCL" 2 \
  "parallel.zero = 2 captures the gradients' reduce-scatter .* set parallel.comm = \"nccl\"" -- \
  $bin train configs/tiny.toml "${args[@]}" --set training.cuda_graph=true --set precision.device='"cuda"' \
  --set parallel.dp=2 --set parallel.zero=2 --dry-run

check tiny configs/tiny.toml "${mla[@]}" "${moe[@]}"
check deepseek-v3-small configs/deepseek-v3-small.toml "${mla[@]}" "${moe[@]}" model.attention.q_lora_rank=8
check deepseek-v3 configs/deepseek-v3.toml "${mla[@]}" "${moe[@]}" model.attention.q_lora_rank=8 model.moe.top_k=4
check moe-1b configs/moe-1b.toml "${mla[@]}" "${moe[@]}" model.attention.q_lora_rank=8
check gcide configs/gcide.toml "${mha[@]}" "${moe[@]}"
# The GEMM precisions: bf16 and FP8 GEMMs read weights prepared after each update.
check tiny-bf16 configs/tiny.toml "${mla[@]}" "${moe[@]}" precision.matmul='"bf16"'
check tiny-fp8 configs/tiny.toml "${mla[@]}" "${moe[@]}" precision.matmul='"fp8"'
check llama3-70b configs/llama3-70b.toml "${mha[@]}" model.attention.n_kv_heads=1 model.n_layers=2 \
  model.n_dense_layers=2

# layout NAME RANKS EXPECTED SETTINGS...: tiny.toml over several ranks; EXPECTED matches the summary.
layout() {
  local name=$1 ranks=$2 want=$3; shift 3
  mapfile -t args < <(sets run.name="\"$name\"" "${mla[@]}" "${moe[@]}" "$@")
  expect "capture check: $name" 0 "$want" -- mpi "$ranks" $bin train configs/tiny.toml "${args[@]}" --check-capture
}
ranks_ok() { echo "capture check: 3 step\(s\) after the first two compared on $1 rank\(s\): ok"; }

layout dp2 2 "$(ranks_ok 2)" parallel.dp=2
layout tp2 2 "$(ranks_ok 2)" parallel.tp=2
layout pp2 2 "$(ranks_ok 2)" parallel.pp=2 model.n_layers=4
layout dp2-zero1 2 "$(ranks_ok 2)" parallel.dp=2 parallel.zero=1
layout dp2-zero3 2 "$(ranks_ok 2)" parallel.dp=2 parallel.zero=3
layout tp2-sequence-parallel 2 "$(ranks_ok 2)" parallel.tp=2 parallel.sequence_parallel=true
layout pp2-dualpipev 2 "$(ranks_ok 2)" parallel.pp=2 parallel.schedule='"dualpipev"' model.n_layers=4 \
  training.global_batch=8
layout pp2-interleaved 2 "$(ranks_ok 2)" parallel.pp=2 parallel.vpp=2 parallel.schedule='"interleaved"' \
  model.n_layers=4
# Expert parallelism: each MoE layer (2 here) reads the expert counts of each micro-batch (1 per rank:
# global_batch 4 over dp 2, micro_batch 2) once, in its forward pass, to size the all-to-all: 2 downloads a
# step, inside the passes; none in the step's own part.
layout ep2 2 "$(ranks_ok 2); downloads inside the last step's passes: 2$" parallel.dp=2 parallel.ep=2
