#!/usr/bin/env bash
# The README's examples, run as written (tests/readme_examples.py says how).
exec python3 "$(dirname "$0")/readme_examples.py"
