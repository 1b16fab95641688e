"""Writes a run directory with a log.h5 shaped as `moetrain train` writes it, its losses a fixed function of
the step, so runs of different lengths share their values: `python made_up_run.py DIR STEPS`.
The model has 3 blocks, the first dense (model.n_dense_layers = 1), so its MoE layers are blocks 1 and 2."""
import math
import sys

import h5py
import numpy as np

SCALARS = ["aux_loss", "mtp_loss", "lr", "grad_norm", "tokens_per_s", "flops_per_s", "mfu",
           "time/forward", "time/backward", "time/optimizer", "time/step"]
CONFIG = """[run]
name = "made-up"
[model]
n_layers = 3
n_dense_layers = 1
[training]
steps = 1000
"""


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    step = np.arange(1, steps + 1, dtype=np.int64)
    with h5py.File(f"{out}/log.h5", "w", libver="latest") as f:
        f.attrs["config_toml"] = np.bytes_(CONFIG)
        f.attrs["total_params"] = 1000.0
        f.create_dataset("step", data=step, maxshape=(None,))
        f.create_dataset("loss", data=np.array([3 + 5 / s + 0.3 * math.sin(s) for s in step]), maxshape=(None,))
        for name in SCALARS:
            f.create_dataset(name, data=np.full(steps, 0.5), maxshape=(None,))
        load = np.tile(np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32), (steps, 2, 1))
        f.create_dataset("moe/expert_load", data=load)
        f.create_dataset("moe/expert_bias", data=np.zeros_like(load))
        d = f.create_dataset("timing/rank_phases", data=np.ones((steps, 1, 7), dtype=np.float32))
        d.attrs["phases"] = np.bytes_("compute,tp_comm,ep_comm,pipeline_wait,grad_sync,optimizer,step")
        f.create_dataset("eval/step", data=np.array([steps], dtype=np.int64))
        f.create_dataset("eval/loss", data=np.array([3.0]))


main()
