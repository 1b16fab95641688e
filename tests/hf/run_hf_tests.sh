#!/usr/bin/env bash
# moetrain against Hugging Face transformers on CPU (tests/hf/hf_roundtrip.py says what is
# checked): one PASS or FAIL line per case.
set -u
cd "$(dirname "$0")/../.."
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# transformers' progress bars and notices go to stderr; a failure's detail follows its FAIL line.
"$python" tests/hf/hf_roundtrip.py ./moetrain "$tmp" 2> "$tmp/stderr"
rc=$?
[[ $rc -ne 0 ]] && tail -n 5 "$tmp/stderr"
exit $rc
