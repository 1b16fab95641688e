#!/usr/bin/env bash
# Rewrites the config reference table of docs/config.md with the one `./moetrain keys` prints.
set -euo pipefail
cd "$(dirname "$0")/.."
table=$(./moetrain keys)
awk -v table="$table" '
  /^\| key \| type \| valid \| default \| meaning \|$/ { print table; skipping = 1; next }
  skipping && /^\|/ { next }
  { skipping = 0; print }
' docs/config.md > docs/config.md.tmp
mv docs/config.md.tmp docs/config.md
