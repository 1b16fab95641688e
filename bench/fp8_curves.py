"""Training curves of several runs against a reference run: smoothed loss at common steps.

    python bench/fp8_curves.py REFERENCE/log.h5 RUN/log.h5 [RUN/log.h5 ...]

For each run, the training loss averaged over the 50 steps ending at each 100th step both runs
reached, and its relative difference from the reference's; the last such step is the comparison.
"""
import sys

import h5py
import numpy as np

WINDOW = 50


def losses(path):
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        return dict(zip(f["step"][()].tolist(), f["loss"][()].tolist()))


def smoothed(curve, step):
    return float(np.mean([curve[s] for s in range(step - WINDOW + 1, step + 1)]))


def main():
    ref_path, runs = sys.argv[1], sys.argv[2:]
    ref = losses(ref_path)
    for path in runs:
        run = losses(path)
        common = [s for s in range(100, max(run) + 1, 100) if s in ref and all(t in run for t in range(s - WINDOW + 1, s + 1))]
        cells = []
        for s in common:
            a, b = smoothed(run, s), smoothed(ref, s)
            cells.append(f"{s}: {a:.4f} ({100 * (a - b) / b:+.2f}%)")
        print(f"{path}: " + "; ".join(cells))
    print(f"reference {ref_path}: " + "; ".join(f"{s}: {smoothed(ref, s):.4f}" for s in range(100, max(ref) + 1, 100)))


if __name__ == "__main__":
    main()
