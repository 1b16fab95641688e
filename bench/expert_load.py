"""Expert-load imbalance over a run, from its log.h5.

    python bench/expert_load.py RUN_DIR/log.h5 [WINDOW]

Imbalance of a step = max over experts of the load divided by the mean load (1 = perfectly
even, n_experts = everything on one expert), averaged over the MoE layers. Prints the mean
imbalance over the first and the last WINDOW steps (default 20), and the final loss.
"""
import sys

import h5py


def main():
    path, window = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with h5py.File(path, "r", libver="latest", swmr=True) as f:
        load = f["moe/expert_load"][()]  # [steps, layers, experts], fractions of routed tokens
        loss = f["loss"][()]
    experts = load.shape[2]
    imbalance = (load.max(axis=2) * experts).mean(axis=1)
    first, last = imbalance[:window].mean(), imbalance[-window:].mean()
    print(f"imbalance first {window} steps {first:.2f}, last {window} steps {last:.2f}; "
          f"final loss {loss[-window:].mean():.4f} (mean of the last {window})")


if __name__ == "__main__":
    main()
