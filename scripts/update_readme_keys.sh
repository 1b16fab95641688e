#!/usr/bin/env bash
# Rewrites the README's config reference table with the one `./moetrain keys` prints.
set -euo pipefail
cd "$(dirname "$0")/.."
table=$(./moetrain keys)
awk -v table="$table" '
  /^\| key \| type \| valid \| default \| meaning \|$/ { print table; skipping = 1; next }
  skipping && /^\|/ { next }
  { skipping = 0; print }
' README.md > README.md.tmp
mv README.md.tmp README.md
