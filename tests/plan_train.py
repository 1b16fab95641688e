"""Every layout `moetrain plan` proposes runs in `moetrain train` as printed: for each shipped
experiment, cluster profile and job size, the planner's top layouts go back into `train --dry-run --cluster`
with the --set arguments plan printed for them, which must be accepted and predicted the same
(the same layout text and step time). One PASS or FAIL line per experiment, cluster and size."""
import glob
import json
import os
import re
import subprocess
import sys

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
moetrain = os.path.join(repo, "moetrain")
top = 10


def run(args):
    return subprocess.run([moetrain] + args, cwd=repo, capture_output=True, text=True)


def check(experiment, cluster, gpus):
    name = f"{os.path.basename(experiment)} on {gpus or 'all'} of {os.path.basename(cluster)}"
    planned = run(["plan", experiment, "--cluster", cluster, "--top", str(top), "--json"] +
                  (["--gpus", str(gpus)] if gpus else []))
    # A job size no layout fits: plan refuses it, saying why, and there is nothing to train.
    if planned.returncode == 2 and "can run this experiment" in planned.stderr:
        return f"PASS plan->train {name}: no layout, refused with the reason"
    if planned.returncode != 0:
        return f"FAIL plan->train {name}: plan exited {planned.returncode}: {planned.stderr.strip()}"
    layouts = json.loads(planned.stdout)["layouts"]
    accepted = 0
    for layout in layouts:
        args = ["train", experiment, "--dry-run", "--cluster", cluster]
        for s in layout["train_sets"]:
            args += ["--set", s]
        dry = run(args)
        shown = " ".join(args[5:])
        if dry.returncode != 0:
            return f"FAIL plan->train {name}: train --dry-run {shown}: {dry.stderr.strip()}"
        # The dry run prints the step to 3 decimals; the JSON holds it whole (a value on a tie rounds
        # either way), so the two agree to within the printed digit.
        printed = re.search(r"^  step +([0-9.]+) s predicted", dry.stdout, re.M)
        if not printed or abs(float(printed.group(1)) - layout["step_s"]) > 0.0005 + 1e-9:
            return (f"FAIL plan->train {name}: train --dry-run {shown} does not predict {layout['step_s']:.4f} s:\n"
                    f"{dry.stdout[:600]}")
        accepted += 1
    return (f"PASS plan->train {name}: {len(layouts)} layouts proposed, {accepted} accepted by train --dry-run with "
            f"the planner's step time")


experiments = sorted(glob.glob(os.path.join(repo, "configs", "*.toml")))
clusters = sorted(glob.glob(os.path.join(repo, "configs", "clusters", "*.toml")))
# A small job, a middling one and the whole cluster (small experiments fit only the first).
lines = [check(os.path.relpath(e, repo), os.path.relpath(c, repo), gpus)
         for e in experiments for c in clusters for gpus in (8, 64, None)]
print("\n".join(lines))
sys.exit(0)
