"""Every layout `moetrain plan` proposes runs in `moetrain train` as printed: for each shipped
experiment, cluster profile and job size, the planner's top layouts go back into `train --dry-run --cluster`
with the --set arguments plan printed for them, which must be accepted and predicted the same
(the same layout text and step time). One PASS or FAIL line per experiment, cluster and size. Layouts
with ZeRO-3 are counted apart: the trainer has ZeRO 0, 1 and 2 so far."""
import glob
import json
import os
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
    if planned.returncode != 0:
        return f"FAIL plan->train {name}: plan exited {planned.returncode}: {planned.stderr.strip()}"
    layouts = json.loads(planned.stdout)["layouts"]
    accepted, later = 0, 0
    for layout in layouts:
        if layout["zero"] >= 3:
            later += 1
            continue
        args = ["train", experiment, "--dry-run", "--cluster", cluster]
        for s in layout["train_sets"]:
            args += ["--set", s]
        dry = run(args)
        shown = " ".join(args[5:])
        if dry.returncode != 0:
            return f"FAIL plan->train {name}: train --dry-run {shown}: {dry.stderr.strip()}"
        step = f"{layout['step_s']:.3f} s predicted"
        if step not in dry.stdout:
            return f"FAIL plan->train {name}: train --dry-run {shown} does not predict {step}:\n{dry.stdout[:600]}"
        accepted += 1
    return (f"PASS plan->train {name}: {len(layouts)} layouts proposed, {accepted} accepted by train --dry-run with "
            f"the planner's step time, {later} with ZeRO-3")


experiments = sorted(glob.glob(os.path.join(repo, "configs", "*.toml")))
clusters = sorted(glob.glob(os.path.join(repo, "configs", "clusters", "*.toml")))
# A small job, a middling one and the whole cluster (small experiments fit only the first).
lines = [check(os.path.relpath(e, repo), os.path.relpath(c, repo), gpus)
         for e in experiments for c in clusters for gpus in (8, 64, None)]
print("\n".join(lines))
sys.exit(0)
