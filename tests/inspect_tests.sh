#!/usr/bin/env bash
# `moetrain inspect` on real runs: every case prints PASS or FAIL and what it checked. The numbers
# inspect prints are compared with log.h5 and the checkpoints read independently (h5dump, h5ls).
set -u
cd "$(dirname "$0")/.."
bin=./moetrain
tmp=$(mktemp -d)
live_pid=""
trap '[[ -n $live_pid ]] && kill -TERM "$live_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
run_as_root=""
[[ $(id -u) -eq 0 ]] && run_as_root="--allow-run-as-root"

source tests/expect.sh
# check NAME COMMAND...: passes when the command prints "ok".
check() { expect "$1" 0 "^ok$" -- "${@:2}"; }
# A log dataset, every value with 17 digits, comma-separated.
series() { h5dump -m '%.17g' -d "$2" -y -o "$tmp/series.txt" "$1/log.h5" >/dev/null && tr -d ' \n' < "$tmp/series.txt"; }

for i in $(seq 1 60); do printf 'fortune number %d, with some more words to read\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" >/dev/null
python3 tests/tiny_experiment.py "$tmp" run.name='"a"' model.n_layers=3 model.n_dense_layers=1 training.steps=12 training.eval_every=4 checkpoint.every=6 checkpoint.keep=3 precision.device='"auto"' > "$tmp/exp.toml"
a=$tmp/runs/a b=$tmp/runs/b
$bin train "$tmp/exp.toml" >/dev/null 2>&1
$bin train "$tmp/exp.toml" --set run.name=b --set optimizer.lr=0.001 >/dev/null 2>&1

# One run: the printed numbers are the log's.
$bin inspect "$a" > "$tmp/a.txt" 2>&1
check "inspect prints the final and the best loss of log.h5 and their steps" python3 -c "
import re
losses = [float(x) for x in '$(series "$a" /loss)'.split(',')]
steps = '$(series "$a" /step)'.split(',')
text = open('$tmp/a.txt').read()
want = 'last %.4f at step %s;' % (losses[-1], steps[-1])
assert len(steps) == 12 and want in text, (want, text)
i = losses.index(min(losses))
best = 'best loss   %.4f at step %s;' % (losses[i], steps[i])
assert best in text, (best, text)
assert re.search(r'^status +complete$', text, re.M), text
assert re.search(r'^progress +12 of 12 steps, 384 of 384 tokens', text, re.M), text
print('ok')"
check "inspect prints the best validation loss of log.h5 and its step" python3 -c "
vals = [float(x) for x in '$(series "$a" /eval/loss)'.split(',')]
steps = '$(series "$a" /eval/step)'.split(',')
i = vals.index(min(vals))
want = 'best %.4f at step %s' % (vals[i], steps[i])
assert want in open('$tmp/a.txt').read(), want
print('ok')"
check "inspect shows the config highlights, expert balance per MoE block and checkpoints" python3 -c "
import re
text = open('$tmp/a.txt').read()
want = [r'^model +3 layers \(1 dense, 2 MoE\), d_model 16, MHA 2 heads x 8 \(2 kv heads\), 4 routed experts \(top 2\)',
        r'^training +12 steps of 4 sequences x 8 tokens \(384 tokens\), micro-batch 2$',
        r'^ +block 1 +[0-9.]+ -> +[0-9.]+$', r'^ +block 2 +[0-9.]+ -> +[0-9.]+$', r'^checkpoints +step 6, 12$']
for w in want: assert re.search(w, text, re.M), (w, text)
print('ok')"
check "--json: the exact final loss, steps, smoothed loss over --window" python3 -c "
import json, subprocess
d = json.loads(subprocess.run(['$bin', 'inspect', '--json', '--window', '3', '$a'], capture_output=True, text=True, check=True).stdout)
losses = [float(x) for x in '$(series "$a" /loss)'.split(',')]
assert len(d) == 1, d
r = d[0]
assert r['loss_last'] == losses[-1], (r['loss_last'], losses[-1])
assert r['steps'] == 12 and r['steps_total'] == 12 and r['status'] == 'complete', r
assert r['smooth_window'] == 3 and abs(r['loss_smoothed'] - sum(losses[-3:]) / 3) < 1e-12, r
assert r['checkpoints'] == [6, 12] and r['config']['optimizer.lr'] == 0.003 and r['mfu'] is None, r
assert len(r['imbalance_first']) == 2 and all(1 <= x <= 4 for x in r['imbalance_first'] + r['imbalance_last']), r
print('ok')"

# Several runs: a comparison table with a column only for keys that differ.
$bin inspect "$a" "$b" > "$tmp/ab.txt" 2>&1
check "two runs: one table with an optimizer.lr column, no column for equal keys" python3 -c "
lines = open('$tmp/ab.txt').read().splitlines()
head = lines[0].split()
assert head[:2] == ['run', 'optimizer.lr'] and 'status' in head and 'tok/s' in head, head
assert 'model.d_model' not in head and 'run.name' not in head and 'training.steps' not in head, head
assert lines[1].split()[:4] == ['$a', '0.003', 'complete', '12/12'], lines[1]
assert lines[2].split()[:4] == ['$b', '0.001', 'complete', '12/12'], lines[2]
print('ok')"
check "--json of two runs: an array of objects, one per run" python3 -c "
import json, subprocess
d = json.loads(subprocess.run(['$bin', 'inspect', '--json', '$a', '$b'], capture_output=True, text=True, check=True).stdout)
assert [r['name'] for r in d] == ['a', 'b'], d
assert [r['config']['optimizer.lr'] for r in d] == [0.003, 0.001], d
assert d[1]['loss_last'] == float('$(series "$b" /loss)'.split(',')[-1]), d[1]
print('ok')"
check "--csv: a header row, then a row per run with the same fields as --json" python3 -c "
import csv, io, json, subprocess
out = subprocess.run(['$bin', 'inspect', '--csv', '$a', '$b'], capture_output=True, text=True, check=True).stdout
assert out.startswith('dir,name,status,steps,steps_total,'), out[:80]
rows = list(csv.DictReader(io.StringIO(out)))
js = json.loads(subprocess.run(['$bin', 'inspect', '--json', '$a', '$b'], capture_output=True, text=True, check=True).stdout)
assert len(rows) == 2 and [r['optimizer.lr'] for r in rows] == ['0.003', '0.001'], rows
for r, j in zip(rows, js):
  assert set(j) - {'config'} <= set(r) and float(r['loss_last']) == j['loss_last'] and r['mfu'] == '', (r, j)
print('ok')"

# A checkpoint directory: its attributes and arrays, counted independently with h5ls.
ck=$a/ckpt/step_00000012
check "inspect of a checkpoint: step, samples, arrays and values as in the files" python3 -c "
import json, re, subprocess
text = subprocess.run(['$bin', 'inspect', '$ck'], capture_output=True, text=True, check=True).stdout
params = len(re.findall(r'^/params/\S+ +Dataset', '''$(h5ls -r "$ck/rank_00000.h5")''', re.M))
assert re.search(r'^step +12, 48 sequences seen \(384 tokens\)$', text, re.M), text
assert re.search(r'^params +%d arrays, ' % params, text, re.M) and params > 0, (params, text)
assert re.search(r'^optim +%d arrays, ' % (2 * params), text, re.M), text
assert re.search(r'^files +1 of 1 .*rank_00000.h5$', text, re.M) and 'complete (manifest.toml present)' in text, text
c = json.loads(subprocess.run(['$bin', 'inspect', '--json', '$ck'], capture_output=True, text=True, check=True).stdout)[0]
r = json.loads(subprocess.run(['$bin', 'inspect', '--json', '$a'], capture_output=True, text=True, check=True).stdout)[0]
assert c['params_values'] == r['total_params'] and c['params_bytes'] == 4 * c['params_values'], (c, r)
assert c['step'] == 12 and c['config']['optimizer.lr'] == 0.003, c
print('ok')"
cp -r "$ck" "$a/ckpt/step_00000013.tmp" && rm "$a/ckpt/step_00000013.tmp/manifest.toml"
expect "an interrupted checkpoint write is flagged in the run" 0 "^checkpoints +step 6, 12; incomplete: step_00000013.tmp \(no manifest.toml\)$" -- \
  $bin inspect "$a"
expect "and in the checkpoint itself" 0 "^status +incomplete: no manifest.toml" -- $bin inspect "$a/ckpt/step_00000013.tmp"

# Two ranks: the layout is the log's.
mpirun --oversubscribe $run_as_root -np 2 $bin train "$tmp/exp.toml" --set run.name=dp2 --set parallel.dp=2 >/dev/null 2>&1
expect "a 2-rank run shows its layout" 0 "^layout +dp=2 tp=1 pp=1 ep=1 zero=0 mbs=[0-9]+ recompute=none$" -- $bin inspect "$tmp/runs/dp2"
expect "its checkpoint holds a file per rank" 0 "^files +2 of 2 .*rank_00000.h5, rank_00001.h5$" -- \
  $bin inspect "$tmp/runs/dp2/ckpt/step_00000012"

# A run being written: inspect reads it while the trainer appends, then after SIGTERM stops it.
live=$tmp/runs/live
$bin train "$tmp/exp.toml" --set run.name=live --set training.steps=1000000 --set checkpoint.every=0 >"$tmp/live.out" 2>&1 &
live_pid=$!
steps=0
for _ in $(seq 1 1200); do  # event-driven: until the log holds 2 steps (bounded)
  steps=$($bin inspect --json "$live" 2>/dev/null | python3 -c "import json, sys; print(json.load(sys.stdin)[0]['steps'])" 2>/dev/null)
  [[ ${steps:-0} -ge 2 ]] && break
  kill -0 $live_pid 2>/dev/null || break
  sleep 0.05
done
expect "a run being written reads as running" 0 "^status +running \(pid [0-9]+ on host .+ holds .*/lock\), at step [0-9]+ of 1000000$" -- \
  $bin inspect "$live"
kill -TERM $live_pid
wait $live_pid
live_status=$? live_pid=""
check "stopped by SIGTERM: stopped at the step of its checkpoint" python3 -c "
import json, re, subprocess
text = subprocess.run(['$bin', 'inspect', '$live'], capture_output=True, text=True, check=True).stdout
m = re.search(r'^status +stopped at step (\d+) of 1000000$', text, re.M)
assert $live_status == 130 and m and int(m.group(1)) >= $steps >= 2, ($live_status, '$steps', text)
assert re.search(r'^checkpoints +step %s$' % m.group(1), text, re.M), text
print('ok')"

# Errors: the path, what is wrong, what would be right; status 2.
mkdir -p "$tmp/empty"
expect "a directory that is neither a run nor a checkpoint" 2 \
  "error: $tmp/empty: neither a run nor a checkpoint directory .*give a run directory \(it holds log.h5" -- $bin inspect "$tmp/empty"
expect "a directory of checkpoints names the checkpoints inside" 2 "inside it: $tmp/runs/a/ckpt/step_" -- \
  $bin inspect "$tmp/runs/a/ckpt"
expect "a missing path" 2 "error: $tmp/nope: no such file or directory; give a run directory" -- $bin inspect "$tmp/nope"
expect "runs and checkpoints are not mixed" 2 "$a is a run but $ck is a checkpoint" -- $bin inspect "$a" "$ck"
mkdir -p "$tmp/broken" && echo "not hdf5" > "$tmp/broken/log.h5"
expect "a damaged log.h5" 2 "error: $tmp/broken/log.h5: not a readable HDF5 file" -- $bin inspect "$tmp/broken"
expect "a log.h5 file stands for its run" 0 "^run +$a \(run.name a\)$" -- $bin inspect "$a/log.h5"
