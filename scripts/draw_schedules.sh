#!/usr/bin/env bash
# Draws the schedules docs/pipeline_schedules.md shows into docs/schedules/ (uniform costs: F=I=W=1, B=2, F&B=3).
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/schedules
mkdir -p "$out"
./moetrain schedule --kind 1f1b --pp 8 --microbatches 20 --svg "$out/1f1b_pp8_m20.svg" > /dev/null
./moetrain schedule --kind interleaved --pp 4 --microbatches 8 --vpp 2 --svg "$out/interleaved_pp4_m8_v2.svg" > /dev/null
./moetrain schedule --kind zb-h1 --pp 8 --microbatches 20 --svg "$out/zb-h1_pp8_m20.svg" > /dev/null
./moetrain schedule --kind dualpipe --pp 8 --microbatches 20 --svg "$out/dualpipe_pp8_m20.svg" > /dev/null
./moetrain schedule --kind dualpipev --pp 4 --microbatches 10 --svg "$out/dualpipev_pp4_m10.svg" > /dev/null
echo "drew $(ls "$out" | wc -l) schedules into $out"
