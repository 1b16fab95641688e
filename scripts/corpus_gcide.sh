#!/bin/sh
# The second corpus: GCIDE, the Collaborative International Dictionary of English (Webster's 1913
# with WordNet; Debian's dict-gcide, about 40 MB of English text), as BPE token shards.
#   sh scripts/corpus_gcide.sh [OUT_DIR [VOCAB]]      (defaults: data/gcide, 8192)
# Writes OUT_DIR/gcide.txt (the dictionary as text, one fortune-format document per entry: entries
# separated by lines holding only "%"; its three Windows-1252 bytes turned into UTF-8), then runs
# `moetrain prepare --vocab VOCAB` on it: train/val shards, tokenizer.bpe, tokenizer.json.
set -e
cd "$(dirname "$0")/.."
out=${1:-data/gcide}
vocab=${2:-8192}
src=/usr/share/dictd/gcide.dict.dz
if [ ! -f "$src" ]; then
  echo "corpus: $src is missing: install Debian's dict-gcide (sh scripts/deps.sh does)" >&2
  exit 2
fi
[ -x ./moetrain ] || { echo "corpus: ./moetrain is missing: run make first" >&2; exit 2; }
mkdir -p "$out"
# An entry starts at a line that begins with a non-blank after a blank line.
zcat "$src" | iconv -f WINDOWS-1252 -t UTF-8 |
  awk 'NR > 1 && prev == "" && /^[^ \t]/ { print "%" } { print; prev = $0 }' > "$out/gcide.txt"
./moetrain prepare --input "$out/gcide.txt" --out "$out" --vocab "$vocab"
