"""AdamW against Muon and MuonClip (bench/RESULTS.md): `python3 bench/muonclip_table.py RUNS_DIR adamw muon ...`,
the first run the reference. Losses are means of 10 steps; the logits are log.h5's /attention/max_logit
(QK-Clip on; tau 1e30 only logs)."""
import sys, h5py, numpy as np
root, runs = sys.argv[1], sys.argv[2:]
tokens_per_step = 16 * 128
data = {}
for r in runs:
    with h5py.File(f"{root}/{r}/log.h5", "r", libver="latest", swmr=True) as f:
        loss = np.array(f["loss"]); m = np.array(f["attention/max_logit"]); c = np.array(f["attention/clipped_heads"])
        ev = np.array(f["eval/loss"]); es = np.array(f["eval/step"])
    data[r] = (loss, m, c, ev, es)
def mean10(x):
    return np.convolve(x, np.ones(10) / 10, mode="valid")
target = mean10(data[runs[0]][0])[-1]
print(f"AdamW's final loss (mean of its last 10 steps): {target:.4f}")
print("| run | final loss (mean of last 10) | final eval loss | tokens to reach AdamW's final loss | largest logit, all steps | largest logit, last step | heads clipped, all steps |")
print("|---|---|---|---|---|---|---|")
for r, (loss, m, c, ev, es) in data.items():
    sm = mean10(loss)
    hit = np.nonzero(sm <= target)[0]
    tok = f"{(hit[0] + 10) * tokens_per_step:,} (step {hit[0] + 10})" if hit.size else "not reached"
    print(f"| {r} | {sm[-1]:.4f} | {ev[-1]:.4f} | {tok} | {m.max():.2f} | {m[-1].max():.2f} | {int(c.sum())} |")
