#!/usr/bin/env bash
# The moetrain binary as a user runs it: every case prints PASS or FAIL and what it checked.
set -u
cd "$(dirname "$0")/.."
bin=./moetrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/expect.sh

for i in $(seq 1 30); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
expect "prepare writes shards" 0 "30 documents" -- $bin prepare --input "$tmp/quotes" --out "$tmp/data"
expect "prepare: missing input" 2 "nope: no such file or directory" -- $bin prepare --input "$tmp/nope" --out "$tmp/d2"

# Every run below keeps off device memory (the strict CPU backend) or crashes.
python3 tests/tiny_experiment.py "$tmp" run.name='"cli"' > "$tmp/exp.toml"
expect "dry run validates and prints the resolved config" 0 "valid" -- $bin train "$tmp/exp.toml" --dry-run
expect "train runs and writes log and checkpoint" 0 "done: 4 steps" -- $bin train "$tmp/exp.toml"
if [[ -f $tmp/runs/cli/log.h5 && -f $tmp/runs/cli/ckpt/step_00000004/rank_00000.h5 ]]; then echo "PASS outputs exist"; else echo "FAIL outputs exist"; fi
expect "log.h5 is readable by h5dump" 0 "DATASET \"loss\"" -- h5dump -H "$tmp/runs/cli/log.h5"
# Sampling: the newest checkpoint, its tokenizer (here bytes), a key/value cache, seeded draws.
expect "sample continues a prompt from the newest checkpoint" 0 "sample: [0-9]+ tokens in" -- \
  $bin sample "$tmp/runs/cli" --prompt "fo" --tokens 4 --seed 2
expect "sample names the checkpoint and the tokens" 0 "step 4 \(.*step_00000004\); .*byte-level tokens; 4 new tokens, temperature 1.5, top-k 0, seed 9" -- \
  $bin sample "$tmp/runs/cli" --tokens 4 --temperature 1.5 --top-k 0 --seed 9
draws() { $bin sample "$tmp/runs/cli" --tokens 6 --temperature 1.5 --top-k 0 --seed "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n'; }
if [[ -n $(draws 9) && $(draws 9) == "$(draws 9)" ]]; then echo "PASS sample: the same seed draws the same tokens"
else echo "FAIL sample: the same seed drew '$(draws 9)' and '$(draws 9)'"; fi
expect "sample: the model's context bounds the sample" 0 "5 new tokens \(model.seq_len = 8 positions\)" -- \
  $bin sample "$tmp/runs/cli" --prompt "ab" --tokens 50
expect "sample: a prompt beyond the model's context" 2 "--prompt: 12 tokens with the document start; the model reads 8 positions \(model.seq_len\): shorten it" -- \
  $bin sample "$tmp/runs/cli" --prompt "abcdefghijk"
expect "sample: an unknown --device" 2 "--device tpu: expected auto, cpu, cuda or cpu-strict" -- \
  $bin sample "$tmp/runs/cli" --device tpu
expect "sample on the plain CPU backend draws what the strict one does" 0 "^same$" -- bash -c \
  "[[ \$($bin sample '$tmp/runs/cli' --tokens 5 --temperature 0 --device cpu 2>/dev/null | od -An -tx1) == \
      \$($bin sample '$tmp/runs/cli' --tokens 5 --temperature 0 --device cpu-strict 2>/dev/null | od -An -tx1) ]] && echo same"
expect "sample: a directory without checkpoints" 2 "$tmp/data: no complete checkpoint" -- $bin sample "$tmp/data"
expect "export refuses an MHA model with MoE blocks, saying why" 2 \
  "model.attention.kind = \"mha\" with MoE blocks \(model.n_dense_layers = 1 of 2\): transformers' DeepseekV3 runs MLA" -- \
  $bin export "$tmp/runs/cli" --hf "$tmp/hf"
mkdir -p "$tmp/hf-gpt2" && echo '{"model_type": "gpt2"}' > "$tmp/hf-gpt2/config.json"
expect "import refuses a model type it has no map for" 2 \
  "hf-gpt2/config.json: model_type = \"gpt2\": moetrain imports deepseek_v3 \(DeepseekV3ForCausalLM\) and llama" -- \
  $bin import "$tmp/hf-gpt2" --out "$tmp/imported" --data "$tmp/data"
echo '{"model_type": "llama",' > "$tmp/hf-gpt2/config.json"
expect "import: a damaged config.json names the byte" 2 "config.json: byte 24: " -- \
  $bin import "$tmp/hf-gpt2" --out "$tmp/imported" --data "$tmp/data"
$bin prepare --input "$tmp/quotes" --out "$tmp/bpe" --vocab 262 > /dev/null
expect "a run on BPE shards keeps its tokenizer, and samples with it" 0 "runs/bpe/tokenizer.bpe, 262 tokens" -- bash -c \
  "$bin train '$tmp/exp.toml' --set run.name=bpe --set model.vocab_size=262 --set data.train='\"$tmp/bpe/train_*.bin\"' \
     --set data.val='\"$tmp/bpe/val_*.bin\"' --set training.eval_sequences=1 --set training.steps=2 >/dev/null \
     && cmp '$tmp/bpe/tokenizer.bpe' '$tmp/runs/bpe/tokenizer.bpe' && rm '$tmp/bpe/tokenizer.bpe' \
     && $bin sample '$tmp/runs/bpe' --tokens 3"
out=$($bin train "$tmp/exp.toml" --profile --set run.name=profiled --set training.steps=3 2>&1)
if grep -q "mean of 2 step(s)" <<<"$out" && grep -qE "^  gemm +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +-$" <<<"$out" &&
  grep -qE "^  add +[0-9.]+ +[0-9.]+ +[0-9.]+% +- +[0-9.]+$" <<<"$out" &&
  grep -qE "^  all ops +[0-9.]+ +100.0%$" <<<"$out"; then echo "PASS --profile: every op kind's time, mean of the steps after the first"
else echo "FAIL --profile: no table of op times"; echo "$out" | tail -n 8 | sed 's/^/    /'; fi
expect "--profile refuses a schedule of chunks" 2 "profile with parallel.pp = 1 and schedule \"1f1b\"" -- \
  $bin train "$tmp/exp.toml" --profile --set run.name=profiled2 --set parallel.schedule=\"dualpipev\"
expect "a schedule of stages on one pipeline rank is refused" 2 \
  "parallel.schedule = \"gpipe\" orders micro-batches over pipeline stages, but parallel.pp = 1 has one stage" -- \
  $bin train "$tmp/exp.toml" --set run.name=gpipe1 --set parallel.schedule=\"gpipe\"
expect "dualpipev on one pipeline rank runs its two chunks" 0 "layout   dp=1 tp=1 pp=1 ep=1 dualpipev zero=0 mbs=2 recompute=none" -- \
  $bin train "$tmp/exp.toml" --set run.name=dpv1 --set parallel.schedule=\"dualpipev\" --set training.steps=1
# Memory per rank at the end of a run: recomputation lowers the activations' high water, nothing else.
memory_of() {
  $bin train "$tmp/exp.toml" --set run.name="mem-$1" --set training.steps=1 --set training.recompute="$1" 2>&1 |
    sed -nE 's/^memory: per rank \(the most of any rank\): weights ([0-9.]+) MB, gradients ([0-9.]+) MB, optimizer ([0-9.]+) MB, activations [0-9.]+ MB \(([0-9.]+) MB at most in use\)$/\1 \2 \3 \4/p'
}
read -r w0 g0 o0 a0 <<<"$(memory_of none)"; read -r w1 g1 o1 a1 <<<"$(memory_of full)"
if [[ -n ${a0:-} && -n ${a1:-} && $w0 == "$w1" && $g0 == "$w0" && $o0 == "$o1" ]] &&
  awk -v a="$a0" -v b="$a1" -v o="$o0" -v w="$w0" 'BEGIN { exit !(b < a && o > w) }'; then
  echo "PASS memory per rank: weights = gradients < optimizer, activations in use $a0 MB -> $a1 MB with full recompute"
else echo "FAIL memory per rank: none gave '${w0:-} ${g0:-} ${o0:-} ${a0:-}', full gave '${w1:-} ${g1:-} ${o1:-} ${a1:-}'"; fi
expect "a finished run resumes to nothing left" 0 "nothing to train" -- $bin train "$tmp/exp.toml"
expect "--set extends the run, resuming" 0 "resume +from .*step_00000004" -- $bin train "$tmp/exp.toml" --set training.steps=6
sed 's/^steps = 4$/stepz = 4/' "$tmp/exp.toml" > "$tmp/typo.toml"
expect "resuming with another seed is refused" 2 "step_00000006: cannot resume .*run.seed = 7 .*the checkpoint's is 1234" -- $bin train "$tmp/exp.toml" --set training.steps=8 --set run.seed=7
expect "unknown key in the file" 2 "typo.toml:18:1: unknown key 'training.stepz'; did you mean 'training.steps'" -- $bin train "$tmp/typo.toml"
expect "unknown key in --set" 2 "--set training.stepz=3: unknown key" -- $bin train "$tmp/exp.toml" --set training.stepz=3
expect "wrong type" 2 "model.d_model must be an integer" -- $bin train "$tmp/exp.toml" --set 'model.d_model="wide"'
expect "top_k > experts" 2 "model.moe.top_k = 9 must be <= model.moe.n_routed_experts = 4" -- $bin train "$tmp/exp.toml" --set model.moe.top_k=9
expect "d_model not divisible by heads" 2 "model.n_heads = 3 must divide model.d_model = 16" -- $bin train "$tmp/exp.toml" --set model.n_heads=3
expect "missing data file" 2 "data.train = \"$tmp/none.bin\": no shard matches" -- $bin train "$tmp/exp.toml" --set data.train="$tmp/none.bin"
expect "missing experiment file" 2 "nothere.toml: cannot open" -- $bin train "$tmp/nothere.toml"
# The strict backend runs the same ops on protected memory: a host access would crash the run.
loss_of() { h5dump -m '%.17g' -d /loss -y -o "$tmp/$1.txt" "$tmp/runs/$1/log.h5" >/dev/null && tr -d ' \n' < "$tmp/$1.txt"; }
expect "cpu-strict trains (device memory unreadable outside ops)" 0 "done: 6 steps" -- $bin train "$tmp/exp.toml" \
  --set run.name=strict --set training.steps=6 --set precision.device=cpu-strict
$bin train "$tmp/exp.toml" --set run.name=plain --set training.steps=6 --set precision.device=cpu >/dev/null 2>&1
expect "cpu-strict and cpu give the same losses, bit for bit" 0 "^same$" -- bash -c \
  "[[ -n \"$(loss_of strict)\" && \"$(loss_of strict)\" == \"$(loss_of plain)\" ]] && echo same"
expect "dump-step --start-only writes the initial state and the batch, not the step" 0 "^start only$" -- bash -c \
  "$bin dump-step $tmp/exp.toml --start-only --out $tmp/start.h5 >/dev/null && h5ls -r $tmp/start.h5 > $tmp/start.txt &&
   grep -q '^/before/params ' $tmp/start.txt && grep -q '^/batch/inputs ' $tmp/start.txt &&
   ! grep -q '^/grads' $tmp/start.txt && echo 'start only'"
expect "cuda requested without a GPU" 2 "precision.device = \"cuda\" cannot be used" -- $bin train "$tmp/exp.toml" --set precision.device=\"cuda\"
# NCCL is loaded when a run asks for it, and checked before the device is.
if ldd $bin | grep -q libcudart; then
  expect "NCCL asked for on a CPU rank" 2 "parallel.comm = \"nccl\" needs each rank on a GPU, but this one runs on cpu" -- \
    $bin train "$tmp/exp.toml" --set parallel.comm=\"nccl\" --set precision.device=\"cpu\"
  expect "NCCL asked for where it cannot be loaded" 2 \
    "parallel.comm = \"nccl\", but NCCL cannot be loaded: MOETRAIN_NCCL_LIBRARY: /nonexistent/libnccl.so.2 could not be loaded \(.*\); install NCCL .*; or set parallel.comm = \"staged\"" -- \
    env MOETRAIN_NCCL_LIBRARY=/nonexistent/libnccl.so.2 $bin train "$tmp/exp.toml" --set parallel.comm=\"nccl\"
else
  expect "NCCL asked for in a build without CUDA" 2 \
    "parallel.comm = \"nccl\", but NCCL cannot be loaded: moetrain was built without CUDA" -- \
    $bin train "$tmp/exp.toml" --set parallel.comm=\"nccl\" --set precision.device=\"cpu\"
fi
expect "NCCL asked for with ranks sharing a GPU" 2 "parallel.comm = \"nccl\" cannot go with parallel.share_gpu = true" -- \
  $bin train "$tmp/exp.toml" --set parallel.comm=\"nccl\" --set parallel.share_gpu=true
expect "keys lists every key" 0 "\| \`model.attention.kind\` \| string" -- $bin keys

# Step lines: one line redrawn in place in a terminal (script(1) gives the run a pseudo-terminal),
# plain lines in a pipe; log.progress forces either. check_progress.py says what each must show.
progress_out() {  # NAME MODE(tty|pipe) SETS...: the raw output of a 4-step run, logging every step
  local name=$1 how=$2; shift 2
  local cmd="$bin train $tmp/exp.toml --set run.name=$name --set log.every=1 $*"
  if [[ $how == tty ]]; then script -qec "$cmd" /dev/null > "$tmp/$name.out"; else $cmd > "$tmp/$name.out"; fi
}
progress_out prog_tty tty
expect "terminal: the step line is redrawn in place, eval lines and the checkpoint on lines of their own" 0 "^ok$" -- \
  python3 tests/check_progress.py in-place "$tmp/prog_tty.out" 4
progress_out prog_pipe pipe
expect "pipe: one plain line per step, no control characters" 0 "^ok$" -- python3 tests/check_progress.py plain "$tmp/prog_pipe.out" 4
progress_out prog_tty_plain tty --set log.progress=plain
expect "terminal with log.progress = \"plain\": plain lines" 0 "^ok$" -- python3 tests/check_progress.py plain "$tmp/prog_tty_plain.out" 4
progress_out prog_pipe_line pipe --set log.progress=line
expect "pipe with log.progress = \"line\": redrawn in place" 0 "^ok$" -- python3 tests/check_progress.py in-place "$tmp/prog_pipe_line.out" 4
expect "log.progress: a value that is not a mode" 2 "log.progress must be one of \"auto\" \| \"line\" \| \"plain\", got \"fancy\"" -- \
  $bin train "$tmp/exp.toml" --set log.progress=fancy
num='[0-9]+\.[0-9]+'
expect "the summary line of a complete run" 0 "^summary: run=prog_pipe steps=4 loss=$num eval_loss=$num tokens_per_s=[0-9]+ elapsed_s=$num status=complete$" -- \
  cat "$tmp/prog_pipe.out"
expect "the summary line of a run stopped by --stop-after" 0 "^summary: run=prog_stop steps=2 loss=$num eval_loss=$num tokens_per_s=[0-9]+ elapsed_s=$num status=stopped$" -- \
  $bin train "$tmp/exp.toml" --set run.name=prog_stop --stop-after 2
expect "the summary line of a run with nothing left to train" 0 "^summary: run=prog_pipe steps=4 loss=nan eval_loss=nan tokens_per_s=nan elapsed_s=$num status=complete$" -- \
  $bin train "$tmp/exp.toml" --set run.name=prog_pipe
# checkpoint.final = false (benchmarks): no checkpoint at the end of training or on a signal, only
# checkpoint.every's; the log, the summary and inspect as ever, and the same command starts over.
nofinal=(--set checkpoint.final=false --set checkpoint.every=0)
expect "checkpoint.final = false: the run's last lines claim no checkpoint" 0 "^ok$" -- bash -c \
  "$bin train $tmp/exp.toml --set run.name=nofinal ${nofinal[*]} > $tmp/nofinal.out 2>&1 && ! grep -q checkpoint $tmp/nofinal.out &&
   grep -qE '^summary: run=nofinal steps=4 .* status=complete$' $tmp/nofinal.out && echo ok"
if [[ -f $tmp/runs/nofinal/log.h5 && -z $(ls -A "$tmp/runs/nofinal/ckpt" 2>/dev/null) && -n $(ls -A "$tmp/runs/cli/ckpt") ]]; then
  echo "PASS checkpoint.final = false with checkpoint.every = 0 leaves log.h5 and no checkpoint; a default run leaves one"
else echo "FAIL checkpoint.final = false: runs/nofinal holds $(ls -R "$tmp/runs/nofinal" | tr '\n' ' ')"; fi
expect "inspect: a run without checkpoints" 0 "checkpoints +none complete" -- $bin inspect "$tmp/runs/nofinal"
expect "the same command again says it starts over, and trains" 0 "resume +none: .*runs/nofinal has a log.h5 but no checkpoint; training starts at step 0" -- \
  $bin train "$tmp/exp.toml" --set run.name=nofinal "${nofinal[@]}"
$bin train "$tmp/exp.toml" --set run.name=periodic --set checkpoint.final=false --set checkpoint.every=3 > /dev/null 2>&1
if [[ -d $tmp/runs/periodic/ckpt/step_00000003 && ! -e $tmp/runs/periodic/ckpt/step_00000004 ]]; then
  echo "PASS checkpoint.final = false keeps checkpoint.every's checkpoints"
else echo "FAIL checkpoint.final = false with checkpoint.every = 3: ckpt holds $(ls "$tmp/runs/periodic/ckpt" 2>&1 | tr '\n' ' ')"; fi
$bin train "$tmp/exp.toml" --set run.name=nofinal_slice "${nofinal[@]}" --stop-after 2 > /dev/null 2>&1
if [[ -f $tmp/runs/nofinal_slice/ckpt/step_00000002/manifest.toml ]]; then
  echo "PASS checkpoint.final = false: --stop-after still checkpoints the slice it ends, for the next to resume"
else echo "FAIL checkpoint.final = false and --stop-after 2: ckpt holds $(ls "$tmp/runs/nofinal_slice/ckpt" 2>&1 | tr '\n' ' ')"; fi
$bin train "$tmp/exp.toml" --set run.name=nofinal_sig "${nofinal[@]}" --set training.steps=100000 --set log.every=1 \
  > "$tmp/nofinal_sig.out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '^step' "$tmp/nofinal_sig.out" && break; sleep 0.1; done
kill -TERM $pid; wait $pid; status=$?
if ((status == 130)) && grep -q "stopped by signal after step [0-9]*; no checkpoint written (checkpoint.final = false): the same command starts again from step 0" "$tmp/nofinal_sig.out" &&
  [[ -z $(ls -A "$tmp/runs/nofinal_sig/ckpt" 2>/dev/null) ]]; then
  echo "PASS checkpoint.final = false: SIGTERM stops the run (status 130) without a checkpoint, and says so"
else echo "FAIL checkpoint.final = false and SIGTERM: exit $status"; tail -n 4 "$tmp/nofinal_sig.out" | sed 's/^/    /'; fi
expect "checkpoint.final: a value that is not a boolean" 2 "checkpoint.final must be true or false, got an integer" -- \
  $bin train "$tmp/exp.toml" --set checkpoint.final=0
expect "the DeepSeek-V3 config is valid at full size" 0 "682636.[0-9]+M total" -- $bin train configs/deepseek-v3.toml --dry-run
expect "no subcommand" 2 "error: no command given" -- $bin

# Pipeline schedules.
expect "schedule prints bubble and order" 0 "bubble per rank: 6 6 6 6 6 6 6 6 .*published bubble \(PP/2-1\)\(F&B\+B-3W\) = 6" -- \
  bash -c "$bin schedule --kind dualpipe --pp 8 --microbatches 20 | tr '\n' ' '"
expect "schedule costs change the bubble" 0 "bubble per rank: 3 3 3 3 \(max 3" -- \
  $bin schedule --kind 1f1b --pp 4 --microbatches 8 --cost-f 0.5 --cost-b 0.5
$bin schedule --kind interleaved --pp 4 --microbatches 8 --vpp 2 --json > "$tmp/sched.json"
expect "schedule --json is the documented shape" 0 "^ok$" -- python3 -c "
import json, sys
d = json.load(open('$tmp/sched.json'))
assert (d['kind'], d['pp'], d['microbatches'], d['vpp']) == ('interleaved', 4, 8, 2), d
assert len(d['ranks']) == 4 and all(len(r) == 2 * 8 * 2 for r in d['ranks'])
assert d['ranks'][0][:3] == ['F0.0', 'F0.1', 'F0.2'] and d['ranks'][0][4] == 'F1.0', d['ranks'][0][:5]
print('ok')"
expect "schedule --svg draws every rank" 0 "^8 ranks, [0-9]+ boxes$" -- bash -c \
  "$bin schedule --kind dualpipe --pp 8 --microbatches 20 --svg $tmp/dp.svg >/dev/null &&
   echo \"\$(grep -c '>rank [0-7]<' $tmp/dp.svg) ranks, \$(grep -c '<rect' $tmp/dp.svg) boxes\""
expect "schedule: dualpipe with odd pp" 2 "dualpipe needs an even pp .*use pp=4 or dualpipev" -- \
  $bin schedule --kind dualpipe --pp 3 --microbatches 12
expect "schedule: unknown kind" 2 "unknown schedule kind 'zb': valid kinds are gpipe, 1f1b, interleaved, zb-h1, dualpipe, dualpipev" -- \
  $bin schedule --kind zb --pp 4 --microbatches 8
expect "schedule: negative cost" 2 "costs and latency must be non-negative" -- \
  $bin schedule --kind 1f1b --pp 4 --microbatches 8 --cost-w -1
expect "schedule: unwritable svg" 2 "cannot write --svg $tmp/no/dir.svg" -- \
  $bin schedule --kind 1f1b --pp 2 --microbatches 4 --svg "$tmp/no/dir.svg"
expect "docs/pipeline_schedules.md's DualPipe drawing is what the code draws" 0 "^same$" -- bash -c \
  "$bin schedule --kind dualpipe --pp 8 --microbatches 20 --svg $tmp/readme.svg >/dev/null &&
   cmp -s $tmp/readme.svg docs/schedules/dualpipe_pp8_m20.svg && echo same"

# The planner.
expect "plan evaluates DeepSeek's layout" 0 "dp=128 tp=1 pp=16 ep=64 dualpipe zero=1 mbs=1 recompute=selective fp8" -- \
  $bin plan configs/deepseek-v3.toml --cluster configs/clusters/h800-deepseek.toml \
  --layout tp=1,pp=16,ep=64,schedule=dualpipe,zero=1,mbs=1,recompute=selective,fp8=on
expect "plan searches and explains" 0 "best without PP: +dp=[0-9]+ tp=[0-9]+ pp=1 " -- \
  $bin plan configs/deepseek-v3.toml --cluster configs/clusters/h800-deepseek.toml --fp8 --top 1 --explain
$bin plan configs/llama3-70b.toml --cluster configs/clusters/tpu-v5p-pod.toml --gpus 4096 --top 2 --json > "$tmp/plan.json"
expect "plan --json lists ranked layouts" 0 "^ok$" -- python3 -c "
import json
d = json.load(open('$tmp/plan.json'))
rows = d['layouts']
assert d['accelerators'] == 4096 and len(rows) == 2, d
assert rows[0]['step_s'] <= rows[1]['step_s'] and rows[0]['pp'] == 1 and rows[0]['fits'], rows[0]
assert abs(sum(rows[0]['time'].values()) - rows[0]['step_s']) < 1e-4 * rows[0]['step_s'], rows[0]
print('ok')"
expect "plan: bad layout key" 2 "--layout tp=1,speed=2: 'speed=2': unknown key; valid keys are dp, tp, pp" -- \
  $bin plan configs/deepseek-v3.toml --cluster configs/clusters/h800-deepseek.toml --layout tp=1,speed=2
expect "plan: layout that cannot run" 2 "dualpipe needs an even number of micro-batches, at least 2\*pp = 4" -- \
  $bin plan configs/deepseek-v3.toml --cluster configs/clusters/h800-deepseek.toml --layout pp=2,schedule=dualpipe --set training.global_batch=2048
expect "plan: missing cluster file" 2 "nope.toml: cannot open the cluster profile" -- \
  $bin plan configs/deepseek-v3.toml --cluster "$tmp/nope.toml"
expect "plan --max-cp searches context parallelism, planned only" 0 "context parallelism \(cp\): planned only" -- \
  $bin plan configs/llama3-70b.toml --cluster configs/clusters/h100-superpod.toml --gpus 512 --set model.seq_len=131072 \
  --set training.global_batch=32 --max-cp 16 --top 1
expect "plan-check predicts the published runs" 0 "^all +[0-9]+ runs  within 10%" -- $bin plan-check
expect "plan-check --breakdown prints each run's parts" 0 "cp comm  ep comm imbalance" -- $bin plan-check --breakdown
mkdir -p "$tmp/published" && ln -sfn "$PWD/configs/clusters" "$tmp/clusters"
sed 's/^gpus = 8192$/gpus = 8000/' configs/published/runs.toml > "$tmp/published/runs.toml"
expect "plan-check: a run whose layout does not match its accelerators" 2 "runs.toml:[0-9]+:1 \(Llama 3 405B, 8192 H100 \(Meta\)\): --layout .*: tp\*cp\*pp = 128 does not divide 8000 accelerators" -- \
  $bin plan-check "$tmp/published/runs.toml"
expect "plan-check: missing runs file" 2 "nope.toml: cannot open the runs file" -- $bin plan-check "$tmp/nope.toml"
