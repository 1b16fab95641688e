"""Checks runs that were killed, stopped or refused on the way against one uninterrupted run of
the same experiment: log.h5 must hold every step exactly once, in order, with the same values bit
for bit, and the newest checkpoint must hold the same parameters, AdamW moments and buffers.

usage: same_as_reference.py REFERENCE_RUN_DIR RUN_DIR...   (prints one line per run; exit 1 on any difference)
"""
import glob
import os
import sys

import h5py
import numpy as np

LOGGED = ["step", "loss", "aux_loss", "lr", "grad_norm", "moe/expert_load", "moe/expert_bias", "eval/step", "eval/loss"]


def log_of(run):
    with h5py.File(os.path.join(run, "log.h5"), "r", libver="latest", swmr=True) as f:
        return {name: f[name][()] for name in LOGGED}


def newest_checkpoint(run):
    done = [d for d in glob.glob(os.path.join(run, "ckpt", "step_*")) if os.path.exists(os.path.join(d, "manifest.toml"))]
    return max(done)


def arrays_of(checkpoint):
    out = {}
    with h5py.File(os.path.join(checkpoint, "rank_00000.h5"), "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def differences(ref, run):
    want, got = log_of(ref), log_of(run)
    steps = [int(s) for s in got["step"]]
    if steps != list(range(1, len(want["step"]) + 1)):
        return f"log.h5 /step is {steps}, not each of 1..{len(want['step'])} once"
    for name in LOGGED:
        if want[name].shape != got[name].shape or not np.array_equal(want[name].view(np.uint8), got[name].view(np.uint8)):
            return f"log.h5 /{name} differs from the uninterrupted run's"
    a, b = arrays_of(newest_checkpoint(ref)), arrays_of(newest_checkpoint(run))
    if sorted(a) != sorted(b):
        return "the newest checkpoints hold different datasets"
    for name in a:
        if not np.array_equal(a[name].view(np.uint8), b[name].view(np.uint8)):
            return f"the newest checkpoint's {name} differs from the uninterrupted run's"
    return ""


def main():
    ref, runs = sys.argv[1], sys.argv[2:]
    bad = 0
    for run in runs:
        why = differences(ref, run)
        print(f"{run}: {why or 'same as the uninterrupted run, bit for bit'}")
        bad += bool(why)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
