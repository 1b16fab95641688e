"""The exported tokenizer.json, loaded by Hugging Face's `tokenizers`, encodes every file to the ids
`moetrain tokenize` gives. Usage: same_ids.py TOKENIZER_JSON TOKENIZER_BPE FILE... (one PASS or FAIL line)."""
import subprocess
import sys

from tokenizers import Tokenizer

hf_json, bpe, files = sys.argv[1], sys.argv[2], sys.argv[3:]
tok = Tokenizer.from_file(hf_json)
out = subprocess.run(["./moetrain", "tokenize", "--tokenizer", bpe] + files, capture_output=True, text=True, check=True).stdout
ours = {}
for line in out.splitlines():
    path, ids = line.split("\t")
    ours[path] = [int(i) for i in ids.split()]
differ, tokens = [], 0
for path in files:
    # tokenizers takes text: a file that is not UTF-8 cannot go in whole, and would be a failure here.
    theirs = tok.encode(open(path, "rb").read().decode("utf-8")).ids
    tokens += len(theirs)
    if ours.get(path) != theirs:
        differ.append(path)
if differ:
    print(f"FAIL tokenizer.json in tokenizers: {len(differ)} of {len(files)} files encode to other ids, e.g. {differ[0]}")
else:
    print(f"PASS tokenizer.json in tokenizers gives moetrain's ids for all {len(files)} files ({tokens} tokens)")
