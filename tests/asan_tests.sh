#!/usr/bin/env bash
# The unit tests of the readers of user files (experiment TOML, config.json, safetensors, JSON, token
# shards, checkpoints, the Hugging Face import), fuzzers included, built with AddressSanitizer and
# UBSan (`make asan`: build/asan/unit_tests). A memory error, a leak or undefined behaviour ends the
# binary with the sanitizer's report and a non-zero exit; doctest's summary line counts the cases.
set -u
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=tests/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec timeout 900 build/asan/unit_tests --no-version "$@"
