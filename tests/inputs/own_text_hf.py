"""The transformers end of "Train on your own text": a moetrain run exported with `moetrain export`
loads as the README says and agrees with moetrain. Prints one PASS or FAIL line per check.
`python tests/inputs/own_text_hf.py HF_DIR STEP_H5 PROMPT GREEDY_FILE SNIPPET`: STEP_H5 is `moetrain
dump-step --from` the exported checkpoint (its batch and logits), GREEDY_FILE what `moetrain sample
--prompt PROMPT --temperature 0` printed, SNIPPET the README's Python lines, run here as written
(with HF_DIR for its directory) to save a second start of transformers."""
import contextlib
import io
import sys

import h5py
import numpy as np
import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

BOUND = 1e-5  # the largest logit difference, relative to the largest logit
DOCUMENT_START = 256


def report(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name} ({detail})", flush=True)
    return ok


def main():
    hf_dir, step_h5, prompt, greedy_file, snippet = sys.argv[1:6]
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=f"{hf_dir}/tokenizer.json")
    model = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    ok = True

    with h5py.File(step_h5, "r") as f:
        inputs, ours = np.array(f["batch/inputs"]), np.array(f["logits"])
    with torch.no_grad():
        theirs = model(torch.tensor(inputs, dtype=torch.long)).logits.float().numpy().reshape(ours.shape)
    err = float(np.max(np.abs(theirs - ours)) / np.max(np.abs(ours)))
    ok &= report("transformers gives moetrain's logits on the text's own batch", err < BOUND,
                 f"largest difference {err:.1e} of the largest logit, bound {BOUND:.0e}")

    ids = [DOCUMENT_START] + tokenizer.encode(prompt)
    ok &= report("the exported tokenizer encodes the prompt to its bytes", ids[1:] == list(prompt.encode()),
                 f"{len(ids) - 1} ids")
    sampled = open(greedy_file, "rb").read().removesuffix(b"\n")
    new = len(sampled) - len(prompt.encode())
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False)
    greedy = bytes(out[0, 1:].tolist())
    ok &= report("transformers' greedy continuation is moetrain sample's at temperature 0",
                 new >= 8 and greedy.startswith(sampled), f"{new} new bytes: {greedy[-new:]!r}")

    # As the README shows it: sampled tokens, decoded to text.
    torch.manual_seed(0)
    out = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=True, top_k=40, temperature=0.8)
    text = tokenizer.decode(out[0, 1:], skip_special_tokens=True)
    ok &= report("transformers samples 40 tokens and the tokenizer decodes them",
                 out.shape[1] == len(ids) + 40 and text.startswith(prompt), repr(text))

    code = open(snippet).read()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README snippet", "exec"), {})
    story = printed.getvalue()
    ok &= report("the README's transformers snippet generates from the export",
                 f'from_pretrained("{hf_dir}")' in code and story.startswith("Once upon a time") and
                 len(story) > len("Once upon a time\n"), repr(story[:60]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
