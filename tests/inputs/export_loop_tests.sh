#!/usr/bin/env bash
# The README's "Export to transformers" commands, as written, on the demo's model (configs/tiny.toml)
# trained 3 steps: each must exit 0 and show what the README says it does, the imported model
# trains, transformers' logits of the exported model are moetrain's on a batch, and its greedy
# generate writes what moetrain's greedy sample does.
set -u
cd "$(dirname "$0")/../.."
repo=$PWD
python=${PYTHON:-$repo/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/expect.sh

mkdir -p "$tmp/bin" "$tmp/data"
ln -s "$repo/moetrain" "$tmp/bin/moetrain"
ln -s "$repo/configs" "$tmp/configs"
ln -s "$repo/.venv" "$tmp/.venv"
# A few thousand documents of the demo's corpus: enough for 3 steps and an evaluation.
mkdir -p "$tmp/text" && cat /usr/share/games/fortunes/{fortunes,computers} > "$tmp/text/some"
./moetrain prepare --input "$tmp/text/some" --out "$tmp/data/fortunes" > /dev/null
cd "$tmp"
export PATH=$tmp/bin:$PATH
expect "the demo's model trains 3 steps" 0 "done: 3 steps" -- \
  moetrain train configs/tiny.toml --set training.steps=3 --set training.eval_every=0

# The commands of the README's section, one case each ("$ " lines, "\" continuations joined).
"$python" - "$repo/README.md" > commands <<'EOF'
import sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0] + "/tests")
from readme_examples import examples
text = open(sys.argv[1]).read()
section = text[text.index("### Export to transformers"):]
section = section[:section.index("\n## ")]
for _, cmd, _ in examples(section):
    print(cmd)
EOF
# What each command's output must show.
patterns=("-> hf/tiny: config.json \(DeepseekV3ForCausalLM\)" "^The meaning of life"
          "train it with: moetrain train runs/tiny-ft/experiment.toml")
mapfile -t commands < commands
for n in "${!commands[@]}"; do
  cmd=${commands[n]}
  expect "README export command $((n + 1)): ${cmd:0:60}" 0 "${patterns[n]:-^never$}" -- bash -o pipefail -c "$cmd"
done
expect "the README's section has the export, generate and import commands" 0 "^3$" -- echo "${#commands[@]}"
expect "the imported demo model trains as is, from the imported weights" 0 \
  "resume +from runs/tiny-ft/ckpt/step_00000000 \(step 0\)" -- \
  moetrain train runs/tiny-ft/experiment.toml --set training.steps=1 --set training.eval_every=0

moetrain dump-step configs/tiny.toml --out step4.h5 --from runs/tiny/ckpt/step_00000003 > /dev/null
expect "transformers' logits of the export are moetrain's" 0 "^same" -- "$python" -c '
import h5py, numpy as np, torch
from transformers import AutoModelForCausalLM
with h5py.File("step4.h5", "r") as f:
    inputs, ours = np.array(f["batch/inputs"]), np.array(f["logits"])
model = AutoModelForCausalLM.from_pretrained("hf/tiny").eval()
with torch.no_grad():
    theirs = model(torch.tensor(inputs, dtype=torch.long)).logits.reshape(ours.shape).numpy()
err = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
print("same" if err < 1e-5 else "differ", "largest difference %.1e of the largest logit" % err)'
# The README's claim: greedy generate writes what `moetrain sample --temperature 0` writes (compared
# as bytes: byte-level token ids are the bytes).
moetrain sample runs/tiny --prompt "The meaning of life" --tokens 60 --temperature 0 2>/dev/null > sampled
expect "transformers' greedy generate continues as moetrain sample --temperature 0" 0 "^same" -- "$python" -c '
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("hf/tiny").eval()
ids = torch.tensor([[256] + list(b"The meaning of life")])
out = model.generate(ids, max_new_tokens=60, do_sample=False)[0].tolist()[1:]
ours = open("sampled", "rb").read()[:-1]  # sample ends its text with a newline
theirs = bytes(t for t in out if t < 256)
print("same" if theirs == ours else "differ: %r vs %r" % (theirs, ours))'
