#!/usr/bin/env bash
# Runs every test suite and ends with one summary line: "N passed, N failed, N skipped".
#   unit:   build/tests/unit_tests (doctest; each test case counts once)
#   asan:   tests/asan_tests.sh (the readers' unit tests and fuzzers under AddressSanitizer and UBSan)
#   cli:    tests/cli_tests.sh (the moetrain binary as a user runs it)
#   gpu tools: tests/gpu_tools_tests.sh (gpu_parity's groups and command line, and the benchmarks'
#           lines, with the strict CPU backend standing in for the GPU)
#   inspect: tests/inspect_tests.sh (moetrain inspect on trained, multi-rank and still-training runs)
#   sweep:  tests/sweep_tests.sh (moetrain sweep: a grid run, skipped, resumed, stopped; grid file errors)
#   tokenizer: tests/tokenizer/run_tokenizer_tests.sh (byte-level BPE: learned, round trip, the same ids
#           in Hugging Face's tokenizers, a model trained on it, errors)
#   oracle: tests/oracle/run_oracle.sh (one optimizer step against PyTorch autograd and AdamW)
#   mpi:    tests/mpi/run_mpi_tests.sh (Comm under mpirun; every layout against one rank), and its layout
#           matrix again on the strict CPU backend (staged payloads, emulated streams)
#   damaged: tests/inputs/damaged_runs_tests.sh (inspect, plot, sample, export on missing, damaged or live runs;
#           a shard truncated during a run)
#   faults: tests/faults/run_fault_tests.sh (kill -9, a full disk, damaged checkpoints, a busy run directory, ...)
#   gpu:    build/tests/gpu_parity (CUDA kernels against the CPU reference) and build/tests/nccl_test (every
#           NcclComm call on one rank); each skipped without a GPU
#   plot:   tests/plot_tests.sh (moetrain plot on real runs; the SVGs rendered by rsvg-convert)
#   plan:   tests/plan_train_tests.sh (every layout plan proposes, accepted by train --dry-run as printed)
#   readme: tests/readme_examples.sh (the "$ " commands of the README and docs/, run as written; their links)
#   gpu check: tests/gpu_check_tests.sh (scripts/gpu_check.sh's stand-in: every section on the strict CPU backend)
#   bundle: scripts/test_gpu_bundle.sh (gpu-bundle/ in a chroot without the build's libraries; CUDA builds)
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0

# A doctest binary: each test case counts once, from its summary line.
doctest_suite() {
  local title=$1 out rc line start=$SECONDS; shift
  echo "== $title"
  out=$("$@" 2>&1); rc=$?
  echo "-- $title: $((SECONDS - start)) s"
  echo "$out" | grep -v '^\[doctest\] Status' | tail -n 40
  line=$(echo "$out" | grep '^\[doctest\] test cases:')
  if [[ $line =~ ([0-9]+)\ passed.*\|\ +([0-9]+)\ failed.*\|\ +([0-9]+)\ skipped ]]; then
    passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2])); skipped=$((skipped + BASH_REMATCH[3]))
  else
    failed=$((failed + 1)); echo "$title: no summary (crashed? exit $rc)"
  fi
  [[ $rc -ne 0 && ${BASH_REMATCH[2]:-0} -eq 0 ]] && { failed=$((failed + 1)); echo "$title exited $rc"; }
}
doctest_suite "unit tests" ./build/tests/unit_tests --no-version

# A suite that prints one PASS, FAIL or SKIP line per case.
line_suite() {
  local title=$1 script=$2 out rc p f s start=$SECONDS
  echo "== $title"
  out=$(bash "$script" 2>&1); rc=$?
  echo "-- $title: $((SECONDS - start)) s"
  echo "$out"
  p=$(echo "$out" | grep -c '^PASS'); f=$(echo "$out" | grep -c '^FAIL'); s=$(echo "$out" | grep -c '^SKIP')
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  [[ $rc -ne 0 && $f -eq 0 ]] && { failed=$((failed + 1)); echo "$script exited $rc"; }
}
line_suite "command-line tests" tests/cli_tests.sh
line_suite "GPU tools without a GPU" tests/gpu_tools_tests.sh
line_suite "inspect tests" tests/inspect_tests.sh
line_suite "sweep tests" tests/sweep_tests.sh
line_suite "tokenizer tests" tests/tokenizer/run_tokenizer_tests.sh
line_suite "PyTorch oracle" tests/oracle/run_oracle.sh
line_suite "Hugging Face round trips" tests/hf/run_hf_tests.sh
line_suite "multi-rank tests" tests/mpi/run_mpi_tests.sh
# The layout matrix again with device memory unreadable by the host and every stream's ops run
# behind it (the strict backend): payloads staged through host memory, stream order by marks only.
MPI_MATRIX_ONLY=1 MPI_MATRIX_DEVICE=cpu-strict line_suite "multi-rank layouts on the strict backend" \
  tests/mpi/run_mpi_tests.sh
line_suite "plot tests" tests/plot_tests.sh
line_suite "plan and train agree" tests/plan_train_tests.sh
line_suite "README and docs examples" tests/readme_examples.sh
line_suite "GPU check stand-in" tests/gpu_check_tests.sh
doctest_suite "AddressSanitizer and UBSan: the readers' unit tests" bash tests/asan_tests.sh
line_suite "damaged, missing and live runs, logs and shards" tests/inputs/damaged_runs_tests.sh
line_suite "config and command-line inputs" tests/inputs/config_tests.sh
line_suite "resume tests" tests/inputs/resume_tests.sh
line_suite "train on your own text" tests/inputs/own_text_tests.sh
line_suite "comparable runs and command-line edges" tests/inputs/compare_tests.sh
line_suite "data order and validation tests" tests/inputs/data_order_tests.sh
line_suite "export to transformers and import, as the README shows" tests/inputs/export_loop_tests.sh
line_suite "memory pre-check" tests/inputs/memory_tests.sh
line_suite "layers and sizes of the source tree" tests/structure_tests.sh
line_suite "grouped GEMM on CUTLASS" tests/grouped_gemm_tests.sh
line_suite "step counters and capture safety" tests/step_counters_tests.sh
line_suite "expert-parallel receive bound" tests/ep_bound_tests.sh
line_suite "GPU rounding and the GPU check's calls, without a GPU" tests/gpu_static_tests.sh
line_suite "output head and loss in chunks of tokens" tests/head_chunk_tests.sh
line_suite "the optimizer inside the capture check" tests/update_capture_tests.sh
line_suite "attention on cuDNN" tests/cudnn_attention_tests.sh
line_suite "FP8 codes written by their producers" tests/fp8_fused_tests.sh
line_suite "fault tests" tests/faults/run_fault_tests.sh
line_suite "GPU bundle" scripts/test_gpu_bundle.sh

for gpu_test in gpu_parity nccl_test; do
  echo "== GPU: $gpu_test"
  out=$(./build/tests/$gpu_test 2>&1); rc=$?
  echo "$out" | tail -n 20
  if [[ $rc -eq 77 ]]; then skipped=$((skipped + 1))
  elif [[ $rc -eq 0 ]]; then passed=$((passed + 1))
  else failed=$((failed + 1)); fi
done

echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
