#!/usr/bin/env bash
# The PyTorch oracle: for each configuration below, `moetrain dump-step` runs one optimizer step
# and check_step.py recomputes it with PyTorch autograd and torch.optim.AdamW. One PASS or FAIL
# line per configuration; on the CPU backends each step again with training.recompute = selective
# and full, which must be bitwise the same (same_step.py). ORACLE_DEVICE picks precision.device for the
# step (default cpu-strict: device memory unreadable outside ops; cuda on a GPU machine); PYTHON
# the interpreter with torch; MOETRAIN the command that runs moetrain; ORACLE_ONLY="NAME ..." runs only those
# configurations (the GPU check's stand-in).
set -u
cd "$(dirname "$0")/../.."
python=${PYTHON:-.venv/bin/python}
device=${ORACLE_DEVICE:-cpu-strict}
read -ra moetrain <<<"${MOETRAIN:-./moetrain}"  # the binary, maybe behind a loader (the GPU check's bundle)
if ! "$python" -c "import torch, h5py" 2>/dev/null; then
  echo "FAIL oracle: $python cannot import torch and h5py (run: sh scripts/deps.sh)"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq 1 60); do printf 'oracle document %d: the quick brown fox jumps over the lazy dog\n%%\n' "$i"; done > "$tmp/text"
"${moetrain[@]}" prepare --input "$tmp/text" --out "$tmp/data" >/dev/null || { echo "FAIL oracle: prepare"; exit 1; }

cat > "$tmp/base.toml" <<TOML
[model]
d_model = 32
n_layers = 3
n_dense_layers = 1
n_heads = 4
head_dim = 8
ffn_hidden = 48
seq_len = 12
init_std = 0.1
[model.moe]
n_routed_experts = 8
n_shared_experts = 1
top_k = 2
expert_hidden = 16
route_scale = 2.5
bias_update_speed = 0.01
aux_loss = "sequence"
aux_alpha = 0.01
[data]
train = "$tmp/data/train_*.bin"
val = "$tmp/data/val_*.bin"
[training]
steps = 10
global_batch = 4
micro_batch = 2
grad_clip = 0.5
[lr_schedule]
warmup_steps = 2
TOML

# step NAME RECOMPUTE --set ... : one dump-step, queued for check_step.py (checked_steps below runs
# them all in one process); RECOMPUTE=yes steps again with training.recompute = selective and full,
# which must give the same step bit for bit.
queued=() recomputed=()
step() {
  local name=$1 recompute=$2 out
  shift 2
  if ! out=$("${moetrain[@]}" dump-step "$tmp/base.toml" --out "$tmp/$name.h5" --set precision.device="$device" "$@" 2>&1); then
    echo "FAIL oracle $name: dump-step failed: $out"; return
  fi
  local same="" mode
  if [[ $recompute == yes ]]; then
    for mode in selective full; do
      if ! out=$("${moetrain[@]}" dump-step "$tmp/base.toml" --out "$tmp/$name-$mode.h5" \
          --set precision.device="$device" "$@" --set training.recompute="$mode" 2>&1); then
        echo "FAIL oracle $name: dump-step with training.recompute = $mode failed: $out"; return
      fi
      if ! out=$("$python" tests/oracle/same_step.py "$tmp/$name.h5" "$tmp/$name-$mode.h5" 2>&1); then
        echo "FAIL oracle $name: with training.recompute = $mode: $out"; return
      fi
      same="$same; recompute=$mode $out"
    done
  fi
  queued+=("$name") recomputed+=("$same")
}

# checked_steps: check_step.py over every queued dump, then one PASS or FAIL line per step.
checked_steps() {
  ((${#queued[@]})) || return 0
  local i name files=()
  for name in "${queued[@]}"; do files+=("$tmp/$name.h5"); done
  "$python" tests/oracle/check_step.py "${files[@]}" > "$tmp/check_step.out" 2>&1
  for i in "${!queued[@]}"; do
    name=${queued[$i]}
    local out
    out=$(cat "$tmp/$name.h5.check" 2>/dev/null) || out="check_step.py wrote nothing: $(tail -n 8 "$tmp/check_step.out")"
    if [[ $(tail -n 1 <<<"$out") != PASS* ]]; then
      echo "FAIL oracle $name:"; echo "$out" | tail -n 8 | sed 's/^/    /'; continue
    fi
    echo "PASS oracle $name: ${out##*worst relative errors: }${recomputed[$i]}"
  done
}

# check NAME --set ... : one configuration in each of ORACLE_PRECISIONS (default: fp32, bf16 and fp8
# with E4M3, and for the configurations in MORE also fp8_e5m2, E4M3 forward and E5M2 gradients, and
# bf16_fp32_activations, bf16 GEMMs with precision.bf16_activations off: the same reference but for the
# gate and up outputs precision.bf16_outputs rounds, as the other activations kept in bfloat16 are values
# the GEMMs round anyway). The recomputation re-runs are
# fp32's only, on the CPU backends: they test the schedule, which the GEMMs' precision does not change.
MORE="mha_sequence_aux mla_q_lora_grouped"
check() {
  local name=$1 precision recompute
  shift
  [[ -z ${ORACLE_ONLY:-} || " $ORACLE_ONLY " == *" $name "* ]] || return 0
  local precisions="fp32 bf16 fp8"
  [[ " $MORE " == *" $name "* ]] && precisions="$precisions fp8_e5m2 bf16_fp32_activations"
  for precision in ${ORACLE_PRECISIONS:-$precisions}; do
    recompute=no
    [[ $precision == fp32 && $device != cuda ]] && recompute=yes
    case $precision in
      fp32) step "$name" "$recompute" "$@" ;;
      fp8_e5m2) step "$name-$precision" no "$@" --set precision.matmul=fp8 --set fp8.formats=e4m3_e5m2 ;;
      bf16_fp32_activations)
        step "$name-$precision" no "$@" --set precision.matmul=bf16 --set precision.bf16_activations=false ;;
      *) step "$name-$precision" no "$@" --set precision.matmul="$precision" ;;
    esac
  done
}

check mha_sequence_aux
check gqa --set model.attention.n_kv_heads=2
check mla --set model.attention.kind=mla --set model.attention.kv_lora_rank=12 \
  --set model.attention.qk_nope_head_dim=8 --set model.attention.qk_rope_head_dim=4 --set model.attention.v_head_dim=6
check mla_q_lora_grouped --set model.attention.kind=mla --set model.attention.q_lora_rank=10 \
  --set model.attention.kv_lora_rank=12 --set model.attention.qk_nope_head_dim=8 --set model.attention.qk_rope_head_dim=4 \
  --set model.attention.v_head_dim=6 --set model.moe.n_groups=4 --set model.moe.topk_groups=2
check aux_free_only --set model.moe.aux_loss=none
check file_order --set data.shuffle=false
check micro_batch_aux --set model.moe.aux_loss=micro_batch
check global_batch_aux --set model.moe.aux_loss=global_batch
check global_batch_aux_no_bias --set model.moe.aux_loss=global_batch --set model.moe.bias_update_speed=0
check no_shared_experts --set model.moe.n_shared_experts=0
check mtp_depth_2 --set model.mtp.depth=2 --set model.mtp.weight=0.5
check dense_only_mtp --set model.n_dense_layers=3 --set model.mtp.depth=1
# The heads over chunks of 5 of a micro-batch's 24 tokens (5, 5, 5, 5, 4), their gradients taken in the forward.
check mtp_head_chunks --set model.mtp.depth=2 --set model.mtp.weight=0.5 --set model.head_chunk_tokens=5
# YaRN at 3x the original context (12 of 4 positions), with magnitudes that differ so that both
# the cos/sin scale and the attention scale show.
yarn=(--set model.rope_scaling.kind=yarn --set model.rope_scaling.factor=3 --set model.rope_scaling.original_seq_len=4
  --set model.rope_scaling.beta_fast=2 --set model.rope_scaling.beta_slow=0.5 --set model.rope_scaling.mscale=0.8
  --set model.rope_scaling.mscale_all_dim=0.5)
check mha_yarn "${yarn[@]}"
check mla_yarn --set model.attention.kind=mla --set model.attention.kv_lora_rank=12 --set model.attention.qk_nope_head_dim=8 \
  --set model.attention.qk_rope_head_dim=8 --set model.attention.v_head_dim=6 "${yarn[@]}"
# Muon on the hidden matrices, AdamW on the rest, against torch.optim.Muon (muon_reference.py: its
# Newton-Schulz iteration kept in float64); fp32 GEMMs and no recomputation re-runs, the optimizer's
# arithmetic being the point. check_update NAME --set ...: one such configuration.
check_update() {
  [[ -z ${ORACLE_ONLY:-} || " $ORACLE_ONLY " == *" $1 "* ]] && step "$1" no "${@:2}"
}
muon=(--set optimizer.kind=\"muon\")
check_update muon_dense "${muon[@]}" --set model.n_dense_layers=3 \
  --set optimizer.muon.scale=\"original\" --set optimizer.muon.nesterov=false --set optimizer.muon.lr=0.02
check_update muon_moe_mla "${muon[@]}" --set model.attention.kind=mla \
  --set model.attention.kv_lora_rank=12 --set model.attention.qk_nope_head_dim=8 \
  --set model.attention.qk_rope_head_dim=4 --set model.attention.v_head_dim=6 --set model.mtp.depth=1
check_update muon_router_adamw "${muon[@]}" \
  --set optimizer.muon.router=\"adamw\" --set optimizer.muon.weight_decay=0.05
# A second step: from a checkpoint after one, so that Muon's momentum and Nesterov's look-ahead (a
# first step's update is a multiple of the gradient, which the iteration's normalisation removes)
# and AdamW's moments enter; dump-step --from continues the checkpoint's optimizer state.
second=(--set optimizer.muon.nesterov=true --set optimizer.muon.momentum=0.8 --set model.mtp.depth=1)
if [[ -z ${ORACLE_ONLY:-} || " $ORACLE_ONLY " == *" muon_second_step "* ]] &&
  "${moetrain[@]}" train "$tmp/base.toml" --set run.out_dir="\"$tmp/runs\"" --set run.name=muon1 \
    --set training.steps=1 --set training.eval_every=0 --set precision.device="$device" "${muon[@]}" "${second[@]}" \
    > "$tmp/muon1.out" 2>&1; then
  check_update muon_second_step "${muon[@]}" "${second[@]}" \
    --from "$tmp/runs/muon1/ckpt/step_00000001"
elif [[ -z ${ORACLE_ONLY:-} || " $ORACLE_ONLY " == *" muon_second_step "* ]]; then
  echo "FAIL oracle muon_second_step: the first step's run failed: $(tail -n 3 "$tmp/muon1.out")"
fi
# MuonClip: Muon and QK-Clip after its step (qk_clip_reference.py, from the Kimi K2 report), with tau below
# the first step's largest logits so that heads are clipped; MHA, GQA (its shared key heads left alone),
# MLA with q's low-rank projection, and QK-Clip under AdamW.
clip=(--set optimizer.qk_clip.enabled=true --set optimizer.qk_clip.tau=0.5 --set model.init_std=0.3)
mla=(--set model.attention.kind=mla --set model.attention.kv_lora_rank=12 --set model.attention.qk_nope_head_dim=8
  --set model.attention.qk_rope_head_dim=4 --set model.attention.v_head_dim=6)
check_update muonclip_mha "${muon[@]}" "${clip[@]}"
check_update muonclip_gqa "${muon[@]}" "${clip[@]}" --set model.attention.n_kv_heads=2
check_update muonclip_mla_q_lora "${muon[@]}" "${clip[@]}" "${mla[@]}" --set model.attention.q_lora_rank=10 \
  --set model.mtp.depth=1
check_update adamw_qk_clip_mla "${clip[@]}" "${mla[@]}"
checked_steps

# FP8 conversion against PyTorch's float8 types (on the build machine; the GPU check has no build/).
if [[ -x build/tests/fp8_codes && -z ${ORACLE_ONLY:-} ]]; then
  if out=$("$python" tests/oracle/check_fp8.py build/tests/fp8_codes 2>&1); then
    echo "PASS oracle fp8 conversion: $(echo "$out" | tr '\n' ' ')"
  else
    echo "FAIL oracle fp8 conversion:"; echo "$out" | tail -n 8 | sed 's/^/    /'
  fi
fi
