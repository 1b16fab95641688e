#!/usr/bin/env bash
# "Train on your own text" (README, docs/own_text.md) end to end on a text file Debian ships: prepare
# -> train a tiny MLA model -> sample -> export -> transformers loads it and generates. Then how
# prepare cuts files into documents and what it refuses. One PASS or FAIL line per case.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-./moetrain}  # another build to test, e.g. a CPU-only one
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/expect.sh
text=/usr/share/common-licenses/GPL-3  # base-files: 35 KB of English in paragraphs
# check NAME CONDITION [OUTPUT]: PASS, or FAIL with the output's last lines.
check() {
  if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; [[ -n ${3:-} ]] && tail -n 8 <<<"$3" | sed 's/^/    /'; fi
}

# ---- the path ----------------------------------------------------------------------------------
out=$($bin prepare --input "$text" --out "$tmp/data/gpl" 2>&1)
paragraphs=$(python3 tests/inputs/own_text_shards.py "$text" "$tmp/data/gpl" 2>&1)
check "prepare cuts the file at blank lines: the shards hold its paragraphs, in order" \
  '[[ $paragraphs =~ ^[0-9]+$ ]] && grep -q "GPL-3: $paragraphs documents (split at blank lines)" <<<"$out"' \
  "$out"$'\n'"$paragraphs"
# The experiment points elsewhere: only the --set flags prepare prints bring the shards in.
python3 tests/tiny_experiment.py "$tmp/nowhere" model.seq_len=128 model.d_model=32 model.n_dense_layers=1 \
  model.attention.kind='"mla"' model.attention.kv_lora_rank=16 model.attention.qk_nope_head_dim=8 \
  model.attention.qk_rope_head_dim=4 model.attention.v_head_dim=8 model.moe.n_shared_experts=1 \
  training.steps=150 training.global_batch=8 training.micro_batch=8 training.eval_every=50 \
  optimizer.lr=1e-2 lr_schedule.warmup_steps=10 run.out_dir="\"$tmp/runs\"" > "$tmp/mla.toml"
command=$(sed -n 's/^prepare: train on them: //p' <<<"$out")
command=${command/#moetrain train EXP.toml/$bin train $tmp/mla.toml}
train=$(eval "$command" 2>&1)
entropy=$(sed -n 's/.*unigram entropy of the data \([0-9.]*\)).*/\1/p' <<<"$train")
eval_loss=$(sed -n 's/^summary: .* eval_loss=\([0-9.]*\) .*/\1/p' <<<"$train")
check "the train command prepare prints trains on the text, below its unigram entropy ($eval_loss < $entropy)" \
  '[[ $command == *"run.name=gpl "* ]] && awk -v a="$eval_loss" -v b="$entropy" "BEGIN { exit !(b > 0 && a < b) }"' \
  "$command"$'\n'"$train"
prompt="The licensee"
$bin sample "$tmp/runs/gpl" --prompt "$prompt" --tokens 30 --temperature 0 > "$tmp/greedy.txt" 2> "$tmp/sample.err"
check "sample continues a prompt from the run" \
  'grep -q "sample: 30 tokens in" "$tmp/sample.err" && [[ $(head -c ${#prompt} "$tmp/greedy.txt") == "$prompt" ]]'
expect "export writes the run as transformers' DeepseekV3ForCausalLM" 0 "json \(DeepseekV3ForCausalLM\)" -- \
  $bin export "$tmp/runs/gpl" --hf "$tmp/hf/gpl"
if ! "$python" -c "import transformers, h5py" 2>/dev/null; then
  echo "SKIP transformers loads the export and generates (skipped: no .venv with transformers; sh scripts/deps.sh)"
else
  $bin dump-step "$tmp/mla.toml" --out "$tmp/step.h5" --from "$tmp/runs/gpl/ckpt/step_00000150" \
    --set data.train="$tmp/data/gpl/train_*.bin" --set data.val="$tmp/data/gpl/val_*.bin" > /dev/null
  # The README's snippet, with this run's export for hf/my.
  awk '/^\.venv\/bin\/python -c .$/ { f = 1; next } f && /^```/ { f = 0 } f' README.md | sed "s/'\$//" |
    sed "s|\"hf/my|\"$tmp/hf/gpl|g" > "$tmp/readme_snippet.py"
  # transformers' notices go to stderr; its stdout is PASS and FAIL lines, and a crash is a FAIL too.
  hf=$("$python" tests/inputs/own_text_hf.py "$tmp/hf/gpl" "$tmp/step.h5" "$prompt" "$tmp/greedy.txt" \
    "$tmp/readme_snippet.py" 2> "$tmp/hf.err")
  rc=$?
  [[ -n $hf ]] && echo "$hf"
  [[ $rc -ne 0 && $hf != *FAIL* ]] && echo "FAIL transformers: exit $rc: $(tail -n 1 "$tmp/hf.err")"
fi

# A BPE: the printed command carries its vocabulary size, and the run trains on it.
out=$($bin prepare --input "$text" --out "$tmp/data/gpl-bpe" --vocab 300 2>&1)
command=$(sed -n 's/^prepare: train on them: //p' <<<"$out")
command=${command/#moetrain train EXP.toml/$bin train $tmp/mla.toml --set training.steps=2}
check "with --vocab the printed train command sets model.vocab_size, and trains" \
  '[[ $command == *"--set model.vocab_size=300" ]] && eval "$command" 2>&1 | grep -q "^done: 2 steps"'

# ---- how files are cut -------------------------------------------------------------------------
expect "prepare --help states the default split" 0 "auto \(the default: a file with lines holding only \"%\"" -- \
  $bin prepare --help
sed 's/$/\r/' "$text" > "$tmp/crlf.txt"
expect "CRLF line ends are read as LF" 0 \
  "crlf.txt: $paragraphs documents \(split at blank lines; CRLF line ends read as LF\)" -- \
  $bin prepare --input "$tmp/crlf.txt" --out "$tmp/data/crlf"
check "a CRLF copy gives the same shards" 'cmp -s "$tmp/data/crlf/train_000000.bin" "$tmp/data/gpl/train_000000.bin"'
small=/usr/share/common-licenses/BSD  # 1499 bytes, 3 paragraphs
expect "too few documents: refused with the counts and a piece size to try" 2 \
  "BSD: 3 documents \(split at blank lines\); at least 20 are needed.*try --split bytes --piece-bytes 74 " -- \
  $bin prepare --input $small --out "$tmp/data/bsd"
expect "the piece size suggested gives enough documents" 0 "BSD: 2[0-9] documents \(pieces of at most 74 bytes\)" -- \
  $bin prepare --input $small --out "$tmp/data/bsd" --piece-bytes 74
check "pieces keep every byte of the file" \
  '(( $(stat -c %s "$tmp/data/bsd/train_000000.bin") + $(stat -c %s "$tmp/data/bsd/val_000000.bin") - 2048 ==
      2 * ($(stat -c %s $small) + $(sed -n "s/.*: \([0-9]*\) documents (pieces.*/\1/p" <(
        $bin prepare --input $small --out "$tmp/data/bsd" --piece-bytes 74)))))'
for i in $(seq 1 25); do printf 'Chapter %d\nIt was a dark night.\n\n* * *\n' "$i"; done > "$tmp/book.txt"
expect "a separator line of your own" 0 "book.txt: 25 documents \(split at lines holding only \"\* \* \*\"\)" -- \
  $bin prepare --input "$tmp/book.txt" --out "$tmp/data/book" --separator '* * *'
expect "several files: a line each" 0 "book.txt: 50 documents \(split at blank lines\).*"$'\n'".*BSD: 3 documents" -- \
  $bin prepare --input "$tmp/book.txt" --input $small --out "$tmp/data/two"
: > "$tmp/empty.txt"
expect "an empty file is refused with what it gave" 2 \
  "empty.txt: 0 documents \(empty\); at least 20.*give at least 320 bytes" -- \
  $bin prepare --input "$tmp/empty.txt" --out "$tmp/data/empty"
printf 'text\n\0\1\2binary' > "$tmp/blob.bin"
expect "a file with NUL bytes is refused as binary" 2 \
  "blob.bin: byte 5 \(line 2\) is a NUL byte: this looks like a binary file" -- \
  $bin prepare --input "$tmp/blob.bin" --out "$tmp/data/blob"
printf 'caf\xe9\n' > "$tmp/latin1.txt"
expect "text that is not UTF-8 is refused with how to convert it" 2 \
  "latin1.txt: byte 3 \(line 1\) is 0xE9, not UTF-8.*iconv -f WINDOWS-1252" -- \
  $bin prepare --input "$tmp/latin1.txt" --out "$tmp/data/latin1"
expect "an unknown split is refused with the valid ones" 2 \
  "--split words is not a split; use auto, paragraphs, separator, bytes or file" -- \
  $bin prepare --input "$text" --out "$tmp/data/x" --split words
expect "--piece-bytes with another split is refused" 2 \
  "--piece-bytes applies to --split bytes, not --split paragraphs" -- \
  $bin prepare --input "$text" --out "$tmp/data/x" --split paragraphs --piece-bytes 100
