"""Checks the step lines of `moetrain train` output saved from a terminal or a pipe.

    check_progress.py in-place OUTPUT STEPS   every step is redrawn in place over the last ("\\r\\033[K"),
                                              eval and checkpoint lines are lines of their own, and only
                                              the last step line stays, below them, before "done:"
    check_progress.py plain OUTPUT STEPS      one line per step, no carriage returns or escape sequences

A terminal turns "\\n" into "\\r\\n"; that is undone first. Prints "ok" or what is wrong."""
import re
import sys

CLEAR = "\r\x1b[K"


def fail(why, text):
    print(f"FAIL: {why}\n{text[-1500:]!r}")
    sys.exit(1)


def main():
    mode, path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    text = open(path, encoding="utf-8", newline="").read().replace("\r\n", "\n")
    step_line = re.compile(r"step +\d+/\d+ \|")
    if mode == "plain":
        if "\r" in text or "\x1b" in text:
            fail("control characters in plain output", text)
        lines = text.splitlines()
        for s in range(1, steps + 1):
            if sum(line.startswith(f"step {s:5d}/{steps} |") for line in lines) != 1:
                fail(f"step {s} is not exactly one line", text)
    else:
        for s in range(1, steps + 1):
            if CLEAR + f"step {s:5d}/{steps} |" not in text:
                fail(f"step {s} is not redrawn in place", text)
        # What stays on screen of each line is what follows its last clear.
        shown = [line.split(CLEAR)[-1] for line in text.split("\n")]
        kept = [i for i, line in enumerate(shown) if step_line.match(line)]
        if len(kept) != 1 or not shown[kept[0]].startswith(f"step {steps:5d}/{steps} |"):
            fail(f"step lines left on screen: {[shown[i] for i in kept]} (only the last one should stay)", text)
        evals = [i for i, line in enumerate(shown) if re.match(r"step +\d+ \| eval loss ", line)]
        checkpoint = [i for i, line in enumerate(shown) if line.startswith("checkpoint: ")]
        done = [i for i, line in enumerate(shown) if line.startswith("done: ")]
        if not evals or len(checkpoint) != 1 or len(done) != 1:
            fail("eval, checkpoint or done lines missing", text)
        if not max(evals) < checkpoint[0] < kept[0] < done[0]:
            fail("the last step line is not below the eval and checkpoint lines and above done:", text)
    print("ok")


main()
