#!/usr/bin/env bash
# Comparable runs and the command line's edges: smoothing by steps, extending a finished run, inspect on a
# sweep, --profile on a finished run, one numbering of MoE layers, exit statuses. MOETRAIN picks the binary.
set -u
cd "$(dirname "$0")/../.."
bin=${MOETRAIN:-./moetrain}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/expect.sh

# The command line: bad input exits 2 as everywhere else, not with CLI11's own statuses (105-109).
expect "no command: the usage, the commands, status 2" 2 "Subcommands:.*train .*error: no command given" -- \
  bash -c "$bin 2>&1 | tr '\n' ' '; exit \${PIPESTATUS[0]}"
expect "an unknown command is named" 2 "error: 'trian' is not a moetrain command" -- $bin trian x.toml
expect "a missing argument: status 2, the command named" 2 "error: train: experiment is required" -- $bin train
expect "a value an option refuses: status 2" 2 "error: sample: --tokens: 'x' is not a whole number" -- \
  $bin sample r --tokens x
expect "options that exclude each other: status 2" 2 "error: inspect: --json excludes --csv" -- \
  $bin inspect r --json --csv
expect "an unknown option: status 2" 2 "error: plot: .*--nope" -- $bin plot r --out o --nope
expect "--help still exits 0" 0 "Usage: .*plot" -- $bin plot --help
