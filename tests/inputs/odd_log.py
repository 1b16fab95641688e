"""Writes a log.h5 shaped as `moetrain train` writes it, with one oddity a damaged or foreign file
may have: `python odd_log.py OUT zero-experts|zero-ranks|empty-phases|flat-load|no-rows`."""
import sys

import h5py
import numpy as np

SCALARS = ["loss", "aux_loss", "mtp_loss", "lr", "grad_norm", "tokens_per_s", "flops_per_s", "mfu",
           "time/forward", "time/backward", "time/optimizer", "time/step"]


def main():
    out, odd = sys.argv[1], sys.argv[2]
    steps = 0 if odd == "no-rows" else 4
    experts = 0 if odd == "zero-experts" else 4
    ranks = 0 if odd == "zero-ranks" else 1
    phases = "" if odd == "empty-phases" else "compute,tp_comm,ep_comm,pipeline_wait,grad_sync,optimizer,step"
    with h5py.File(out, "w", libver="latest") as f:
        f.attrs["config_toml"] = np.bytes_("[run]\nname = \"odd\"\n")
        f.attrs["total_params"] = 1000.0
        f.create_dataset("step", data=np.arange(1, steps + 1, dtype=np.int64), maxshape=(None,))
        for name in SCALARS:
            f.create_dataset(name, data=np.full(steps, 0.5), maxshape=(None,))
        load_shape = (steps, 4) if odd == "flat-load" else (steps, 1, experts)
        f.create_dataset("moe/expert_load", data=np.full(load_shape, 0.25, dtype=np.float32))
        f.create_dataset("moe/expert_bias", data=np.zeros(load_shape, dtype=np.float32))
        d = f.create_dataset("timing/rank_phases", data=np.ones((steps, ranks, 7), dtype=np.float32))
        d.attrs["phases"] = np.bytes_(phases)
        f.create_dataset("eval/step", data=np.array([2, 4], dtype=np.int64))
        f.create_dataset("eval/loss", data=np.array([0.6, 0.5]))


main()
