#!/usr/bin/env bash
# Every layout `moetrain plan` proposes, run through `moetrain train --dry-run` (tests/plan_train.py says how).
exec python3 "$(dirname "$0")/plan_train.py"
