#!/usr/bin/env bash
# Byte-level BPE end to end (moetrain prepare --vocab, moetrain tokenize): a vocabulary learned from
# the fortunes corpus, every file of it decoded back byte for byte, the same ids as the exported
# tokenizer.json gives in Hugging Face's `tokenizers`, a model trained on the BPE shards, the
# errors a user meets, and the second corpus (GCIDE) through the same checks. Every case prints
# PASS, FAIL or SKIP.
set -u
cd "$(dirname "$0")/../.."
bin=./moetrain
python=.venv/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/expect.sh
corpus=/usr/share/games/fortunes

expect "prepare --vocab 2048 learns the merges and encodes the corpus" 0 \
  "BPE vocabulary of 2048 tokens, learned in" -- $bin prepare --input $corpus --out "$tmp/bpe" --vocab 2048
if [[ -s $tmp/bpe/tokenizer.bpe && -s $tmp/bpe/tokenizer.json && $(sed -n 2p "$tmp/bpe/tokenizer.bpe") == "vocab 2048" &&
      $(wc -l < "$tmp/bpe/tokenizer.bpe") -eq $((2048 - 257 + 2)) ]]; then
  echo "PASS tokenizer.bpe (header and one line per merge) and tokenizer.json beside the shards"
else echo "FAIL tokenizer files beside the shards"; fi
# Learning is deterministic: the same corpus gives the same file.
$bin prepare --input $corpus --out "$tmp/bpe2" --vocab 2048 > /dev/null 2>&1
if cmp -s "$tmp/bpe/tokenizer.bpe" "$tmp/bpe2/tokenizer.bpe" && cmp -s "$tmp/bpe/train_000000.bin" "$tmp/bpe2/train_000000.bin"; then
  echo "PASS the same corpus learns the same merges and writes the same shards"
else echo "FAIL a second prepare learned other merges"; fi

mapfile -t files < <(find $corpus -maxdepth 1 -type f ! -name '*.dat' | sort)
expect "decode(encode(file)) is the file, for every file of the corpus" 0 "tokenize: ${#files[@]} files" -- \
  $bin tokenize --tokenizer "$tmp/bpe/tokenizer.bpe" --round-trip "${files[@]}"
"$python" tests/tokenizer/same_ids.py "$tmp/bpe/tokenizer.json" "$tmp/bpe/tokenizer.bpe" "${files[@]}"

python3 tests/tiny_experiment.py "$tmp" run.name='"bpe"' model.vocab_size=2048 data.train="\"$tmp/bpe/train_*.bin\"" \
  data.val="\"$tmp/bpe/val_*.bin\"" training.steps=8 > "$tmp/exp.toml"
expect "a model trains on the BPE shards" 0 "done: 8 steps" -- $bin train "$tmp/exp.toml"
expect "shards with ids beyond model.vocab_size are refused" 2 "train_000000.bin: byte [0-9]+: token [0-9]+ at position [0-9]+ is outside model.vocab_size = 257" -- \
  $bin train "$tmp/exp.toml" --set run.name=small --set model.vocab_size=257

expect "prepare --vocab below 257 is refused" 2 "a BPE vocabulary holds 257 to 65536 tokens" -- \
  $bin prepare --input $corpus --out "$tmp/bad" --vocab 100
{ echo "moetrain-bpe 1"; echo "vocab 259"; echo "97 97"; echo "300 1"; } > "$tmp/broken.bpe"
expect "a merge of a later token is refused with its line" 2 "broken.bpe: line 4: merge 1 \(300 1\) must join two earlier tokens" -- \
  $bin tokenize --tokenizer "$tmp/broken.bpe" "${files[0]}"
{ echo "moetrain-bpe 1"; echo "vocab 300"; echo "97 97"; } > "$tmp/short.bpe"
expect "a tokenizer file that ends early is refused with its line" 2 "short.bpe: line 4: expected merge 1" -- \
  $bin tokenize --tokenizer "$tmp/short.bpe" "${files[0]}"

# The second corpus, prepared by its one command: 40 MB of English as a BPE of 8192 tokens.
if [[ -f /usr/share/dictd/gcide.dict.dz ]]; then
  expect "scripts/corpus_gcide.sh prepares the GCIDE corpus" 0 "BPE vocabulary of 8192 tokens, learned in" -- \
    sh scripts/corpus_gcide.sh "$tmp/gcide" 8192
  expect "decode(encode(file)) is the file for the GCIDE text" 0 "tokenize: 1 files" -- \
    $bin tokenize --tokenizer "$tmp/gcide/tokenizer.bpe" --round-trip "$tmp/gcide/gcide.txt"
  "$python" tests/tokenizer/same_ids.py "$tmp/gcide/tokenizer.json" "$tmp/gcide/tokenizer.bpe" "$tmp/gcide/gcide.txt"
else
  echo "SKIP the GCIDE corpus: /usr/share/dictd/gcide.dict.dz is missing (Debian's dict-gcide; scripts/deps.sh installs it)"
fi
