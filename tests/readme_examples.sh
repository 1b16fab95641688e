#!/usr/bin/env bash
# The examples of the README and docs/, run as written, and their links (tests/readme_examples.py says how).
exec python3 "$(dirname "$0")/readme_examples.py"
