#!/usr/bin/env bash
# moetrain against Hugging Face transformers on CPU (tests/hf/hf_roundtrip.py, hf_keys.py and
# hf_import_run.py say what is checked): one PASS or FAIL line per case.
set -u
cd "$(dirname "$0")/../.."
python=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
# transformers' progress bars and notices go to stderr; a failure's detail follows its FAIL line.
for suite in hf_roundtrip hf_keys hf_import_run; do
  mkdir -p "$tmp/$suite"
  if ! "$python" "tests/hf/$suite.py" ./moetrain "$tmp/$suite" 2> "$tmp/$suite.stderr"; then
    tail -n 5 "$tmp/$suite.stderr"
    status=1
  fi
done
exit $status
