#!/usr/bin/env bash
# `moetrain sweep` as a user runs it: a 2 x 2 grid of a tiny model, run, run again (all skipped),
# one run interrupted and resumed, a stop request, a failing run and grid file mistakes. Every
# case prints PASS or FAIL and what it checked.
set -u
cd "$(dirname "$0")/.."
bin=$PWD/moetrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {  # NAME CONDITION-STATUS [DETAIL]: PASS when the status is 0
  if [[ $2 -eq 0 ]]; then echo "PASS $1"; else echo "FAIL $1"; [[ -n ${3:-} ]] && echo "$3" | tail -n 8 | sed 's/^/    /'; fi
}
expect() {  # NAME EXPECTED_STATUS PATTERN -- COMMAND...: status and output (stdout+stderr) must match
  local name=$1 want=$2 pattern=$3; shift 4
  local out status
  out=$("$@" 2>&1); status=$?
  [[ $status -eq $want ]] && grep -qE -- "$pattern" <<<"$out"
  check "$name" $? "exit $status, wanted $want; output must match /$pattern/:
$out"
}

for i in $(seq 1 30); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" >/dev/null
python3 tests/tiny_experiment.py "$tmp" training.steps=100 > "$tmp/exp.toml"
cat > "$tmp/grid.toml" <<TOML
experiment = "$tmp/exp.toml"
[grid]
"optimizer.lr" = [1e-3, 3e-3]
model.moe.aux_loss = ["none", "sequence"]
[set]
"training.steps" = 4
TOML
sweep_dir=$tmp/runs/grid
names=("lr=0.001,aux_loss=none" "lr=0.001,aux_loss=sequence" "lr=0.003,aux_loss=none" "lr=0.003,aux_loss=sequence")

# First sweep: every run trains. The table must show what each run's own summary line says.
out=$($bin sweep "$tmp/grid.toml" 2>&1); status=$?
echo "$out" > "$tmp/first.out"
expect "the sweep trains every run, in grid order, and ends with 0" 0 "^ok$" -- python3 - "$tmp/first.out" $status <<'PY'
import sys
out, status = open(sys.argv[1]).read(), int(sys.argv[2])
want = ["[1/4] lr=0.001 aux_loss=none: running", "[2/4] lr=0.001 aux_loss=sequence: running",
        "[3/4] lr=0.003 aux_loss=none: running", "[4/4] lr=0.003 aux_loss=sequence: running"]
got = [l for l in out.splitlines() if l.startswith("[")]
assert got == [line for w in want for line in (w, w.replace("running", "complete"))], got
assert status == 0, status
print("ok")
PY
ok=0
for n in "${names[@]}"; do [[ -f "$sweep_dir/$n/ckpt/step_00000004/manifest.toml" ]] || ok=1; done
check "each run has its own directory, named after its values, with its final checkpoint" $ok "$(ls "$sweep_dir")"
h5dump -a /config_toml "$sweep_dir/lr=0.003,aux_loss=sequence/log.h5" > "$tmp/config.txt" 2>&1
grep -q 'lr = 0.003' "$tmp/config.txt" && grep -q 'aux_loss = .*sequence' "$tmp/config.txt" &&
  grep -q 'steps = 4' "$tmp/config.txt" && grep -q "name = .*lr=0.003,aux_loss=sequence" "$tmp/config.txt"
check "a run trains with its grid values and [set] (its log's config)" $? "$(cat "$tmp/config.txt")"
expect "the table has a row per run: values, steps, the run's final loss and eval loss, tok/s, status" 0 "^ok$" -- \
  python3 - "$tmp/first.out" <<'PY'
import re, sys
out = open(sys.argv[1]).read().splitlines()
summaries = {}  # run name -> (loss, eval_loss), as each training printed them
for l in out:
    if l.startswith("summary: "):
        f = dict(kv.split("=", 1) for kv in l[len("summary: "):].split(" "))
        summaries[f["run"]] = (f["loss"], f["eval_loss"])
head = out.index(next(l for l in out if l.split() == ["lr", "aux_loss", "steps", "loss", "eval_loss", "tok/s", "status"]))
rows = [l.split() for l in out[head + 1:head + 5]]
for (lr, balance), row in zip([("0.001", "none"), ("0.001", "sequence"), ("0.003", "none"), ("0.003", "sequence")], rows):
    assert row[:3] == [lr, balance, "4"] and row[6] == "complete", row
    assert (row[3], row[4]) == summaries[f"lr={lr},aux_loss={balance}"], (row, summaries)
    assert re.fullmatch(r"[0-9]+", row[5]) and int(row[5]) > 0, row
assert rows[0][3] != rows[2][3], "the learning rates gave the same loss"
print("ok")
PY

# Second sweep: nothing left to train, so no training process starts.
expect "the same sweep again skips every run as complete" 0 "^ok$" -- bash -c \
  "out=\$($bin sweep $tmp/grid.toml 2>&1) || exit 1
   [[ \$(grep -c ': skipped (complete)$' <<<\"\$out\") -eq 4 ]] && ! grep -q '^moetrain: run' <<<\"\$out\" &&
   grep -q '^sweep grid: 4 of 4 runs complete$' <<<\"\$out\" && echo ok"

# One run interrupted: the trainer stops it after 2 steps in its own directory (as a ctrl-C would).
loss_of() { h5dump -m '%.17g' -d /loss -y -o "$tmp/loss.txt" "$sweep_dir/$1/log.h5" >/dev/null && tr -d ' \n' < "$tmp/loss.txt"; }
uninterrupted=$(loss_of "lr=0.003,aux_loss=none")
rm -rf "$sweep_dir/lr=0.003,aux_loss=none"
$bin train "$tmp/exp.toml" --set run.out_dir="$sweep_dir" --set run.name=lr=0.003,aux_loss=none --set training.steps=4 \
  --set optimizer.lr=0.003 --set model.moe.aux_loss=none --stop-after 2 > /dev/null
out=$($bin sweep "$tmp/grid.toml" 2>&1); status=$?
[[ $status -eq 0 ]] && grep -q '^\[3/4\] lr=0.003 aux_loss=none: resumed from step 2$' <<<"$out" &&
  [[ $(grep -c ': skipped (complete)$' <<<"$out") -eq 3 ]] && [[ $(grep -c '^moetrain: run' <<<"$out") -eq 1 ]]
check "the sweep resumes the interrupted run from its checkpoint and skips the others" $? "$out"
[[ -n $uninterrupted && $(loss_of "lr=0.003,aux_loss=none") == "$uninterrupted" ]]
check "the resumed run's losses are the uninterrupted run's, bit for bit" $?

# A stop request to the sweep alone (SIGTERM to its pid, passed on by timeout --foreground, which
# is there only so that a sweep ignoring it cannot hang the tests) reaches the training, which
# checkpoints; the sweep starts nothing more. Event-driven: the signal goes at the first step line.
cat > "$tmp/long.toml" <<TOML
experiment = "$tmp/exp.toml"
[grid]
"optimizer.lr" = [1e-3, 3e-3]
[set]
training.steps = 1000000
log.every = 1
TOML
mkfifo "$tmp/fifo"
timeout --foreground 120 $bin sweep "$tmp/long.toml" > "$tmp/fifo" 2>&1 &
pid=$!
sent=
while IFS= read -r line; do
  echo "$line" >> "$tmp/long.out"
  if [[ $line == step* && -z $sent ]]; then sent=1; kill -TERM $pid; fi
done < "$tmp/fifo"
wait $pid; status=$?
out=$(cat "$tmp/long.out")
[[ $status -eq 130 ]] && grep -qE '^\[1/2\] lr=0.001: interrupted at step [0-9]+$' <<<"$out" &&
  grep -qE '^0.003 +- +- +- +- +not started$' <<<"$out" && ls -d "$tmp/runs/long/lr=0.001/ckpt/step_"* >/dev/null &&
  [[ ! -e $tmp/runs/long/lr=0.003 ]] && grep -q 'the same command resumes the sweep' <<<"$out"
check "SIGTERM to the sweep stops the running training with a checkpoint, starts no other run, exits 130" $? "exit $status
$out"

# Ctrl-C in a terminal reaches the sweep and its training alike (python's pty: a terminal whose
# ^C the tests can type, once the third step line shows).
sed 's/^\[grid\]$/name = "ctrlc"\n[grid]/' "$tmp/long.toml" > "$tmp/ctrlc.toml"
expect "ctrl-C in a terminal stops the training with a checkpoint and the sweep, exit 130" 0 "^ok$" -- \
  timeout 120 python3 - "$bin" "$tmp/ctrlc.toml" "$tmp/runs/ctrlc" <<'PY'
import os, pty, re, sys
binary, grid, runs = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(binary, [binary, "sweep", grid])
out, typed = b"", False
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:  # the terminal closes when the sweep ends
        break
    if not chunk:
        break
    out += chunk
    if not typed and b"step     3/" in out:
        os.write(fd, b"\x03")
        typed = True
status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
text = out.decode()
step = re.search(r"\[1/2\] lr=0.001: interrupted at step (\d+)", text)
assert status == 130 and step, (status, text[-800:])
assert os.path.isdir(f"{runs}/lr=0.001/ckpt/step_{int(step[1]):08d}") and not os.path.exists(f"{runs}/lr=0.003"), text[-800:]
print("ok")
PY

# Under checkpoint.final = false (benchmarks) a finished run leaves no checkpoint: its exit status
# says it is complete.
cat > "$tmp/nofinal.toml" <<TOML
experiment = "$tmp/exp.toml"
[grid]
"optimizer.lr" = [1e-3, 3e-3]
[set]
training.steps = 2
checkpoint.final = false
checkpoint.every = 0
TOML
out=$($bin sweep "$tmp/nofinal.toml" 2>&1); status=$?
[[ $status -eq 0 ]] && [[ $(grep -c '^\[[12]/2\] lr=0.00[13]: complete$' <<<"$out") -eq 2 ]] &&
  grep -q '^sweep nofinal: 2 of 2 runs complete$' <<<"$out" && [[ -z $(ls -A "$tmp/runs/nofinal/lr=0.001/ckpt" 2>/dev/null) ]]
check "a sweep under checkpoint.final = false: each run complete, no checkpoint" $? "exit $status
$out"

# A run that fails does not stop the others; the sweep ends non-zero and the table says which.
cat > "$tmp/fails.toml" <<TOML
experiment = "$tmp/exp.toml"
[grid]
data.train = ["$tmp/data/train_*.bin", "$tmp/missing.bin"]
[set]
training.steps = 2
TOML
out=$($bin sweep "$tmp/fails.toml" 2>&1); status=$?
[[ $status -eq 1 ]] && grep -qE '^\[2/2\] train=.*missing.bin: failed \(exit 2\)$' <<<"$out" &&
  grep -qE '^\[1/2\] train=.*: complete$' <<<"$out" && grep -qE 'missing.bin +- +- +- +- +failed \(exit 2\)$' <<<"$out" &&
  grep -q '^sweep fails: 1 of 2 runs complete, 1 failed$' <<<"$out"
check "a failing run is reported, the others still run, the sweep exits 1" $? "exit $status
$out"

# Grid file mistakes stop the sweep before any run, naming the file, the place and what is right.
bad() {  # NAME PATTERN GRID-LINES...
  local name=$1 pattern=$2; shift 2
  printf '%s\n' "experiment = \"$tmp/exp.toml\"" "$@" > "$tmp/bad.toml"
  expect "$name" 2 "$pattern" -- $bin sweep "$tmp/bad.toml"
}
bad "grid error: unknown key, at its place in the grid file" \
  "bad.toml:3:20 \(\[grid\] optimizer.lrr = 0.001\): unknown key 'optimizer.lrr'; did you mean 'optimizer.lr'" \
  '[grid]' '"optimizer.lrr" = [1e-3, 3e-3]'
bad "grid error: an empty list" "bad.toml:3:18: \[grid\] optimizer.lr is an empty list; give it at least one value" \
  '[grid]' '"optimizer.lr" = []'
bad "grid error: a single value instead of a list" "bad.toml:3:18: \[grid\] optimizer.lr is a single value; grid values are lists" \
  '[grid]' '"optimizer.lr" = 1e-3'
bad "grid error: a value out of range, in one run" "bad.toml:3:25 \(\[grid\] optimizer.lr = -1.0\): optimizer.lr must be > 0, got -1" \
  '[grid]' '"optimizer.lr" = [1e-3, -1.0]'
bad "grid error: a combination the config rules reject" \
  "bad.toml:3:25 \(\[grid\] model.moe.top_k = 9\): model.moe.top_k = 9 must be <= model.moe.n_routed_experts = 4" \
  '[grid]' '"model.moe.top_k" = [2, 9]'
bad "grid error: unknown key in [set]" "bad.toml:5:18 \(\[set\] training.stepz = 3\): unknown key 'training.stepz'" \
  '[grid]' 'optimizer.lr = [1e-3]' '[set]' 'training.stepz = 3'
bad "grid error: a key the sweep sets itself" "bad.toml:3:12: \[grid\] run.name: the sweep names each run after its grid values" \
  '[grid]' 'run.name = ["a"]'
bad "grid error: TOML syntax" "bad.toml:2:6: TOML syntax error" '[grid'
bad "grid error: no [grid]" "bad.toml: no \[grid\] values; list values per config key" '[set]' 'training.steps = 2'
expect "grid error: missing grid file" 2 "nothere.toml: cannot open the grid file" -- $bin sweep "$tmp/nothere.toml"
[[ ! -e $tmp/runs/bad ]]
check "a grid with a mistake starts no run" $?
