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
# Suites run TEST_LANES at a time (default 2: most are single-threaded, and the machine has two cores), each into
# its own file; their outputs are printed whole, in the order below, once all have ended.
lanes=${TEST_LANES:-2}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
kinds=() titles=() commands=()
# suite KIND TITLE COMMAND: KIND "doctest" (counted from doctest's summary line) or "lines" (one PASS, FAIL or
# SKIP line per case). The longest suites come first, so the last to start are short.
suite() { kinds+=("$1"); titles+=("$2"); commands+=("$3"); }
suite lines "README and docs examples" "bash tests/readme_examples.sh"
suite lines "GPU check stand-in" "bash tests/gpu_check_tests.sh"
suite lines "plan and train agree" "bash tests/plan_train_tests.sh"
suite lines "tokenizer tests" "bash tests/tokenizer/run_tokenizer_tests.sh"
suite lines "damaged, missing and live runs, logs and shards" "bash tests/inputs/damaged_runs_tests.sh"
suite lines "multi-rank tests" "bash tests/mpi/run_mpi_tests.sh"
# The layout matrix again with device memory unreadable by the host and every stream's ops run
# behind it (the strict backend): payloads staged through host memory, stream order by marks only.
suite lines "multi-rank layouts on the strict backend" \
  "MPI_MATRIX_ONLY=1 MPI_MATRIX_DEVICE=cpu-strict bash tests/mpi/run_mpi_tests.sh"
suite lines "PyTorch oracle" "bash tests/oracle/run_oracle.sh"
suite doctest "unit tests" "./build/tests/unit_tests --no-version"
suite lines "Hugging Face round trips" "bash tests/hf/run_hf_tests.sh"
suite doctest "AddressSanitizer and UBSan: the readers' unit tests" "bash tests/asan_tests.sh"
suite lines "export to transformers and import, as the README shows" "bash tests/inputs/export_loop_tests.sh"
suite lines "fault tests" "bash tests/faults/run_fault_tests.sh"
suite lines "train on your own text" "bash tests/inputs/own_text_tests.sh"
suite lines "GPU bundle" "bash scripts/test_gpu_bundle.sh"
suite lines "resume tests" "bash tests/inputs/resume_tests.sh"
suite lines "command-line tests" "bash tests/cli_tests.sh"
suite lines "step counters and capture safety" "bash tests/step_counters_tests.sh"
suite lines "plot tests" "bash tests/plot_tests.sh"
suite lines "GPU tools without a GPU" "bash tests/gpu_tools_tests.sh"
suite lines "data order and validation tests" "bash tests/inputs/data_order_tests.sh"
suite lines "comparable runs and command-line edges" "bash tests/inputs/compare_tests.sh"
suite lines "expert-parallel receive bound" "bash tests/ep_bound_tests.sh"
suite lines "the optimizer inside the capture check" "bash tests/update_capture_tests.sh"
suite lines "inspect tests" "bash tests/inspect_tests.sh"
suite lines "sweep tests" "bash tests/sweep_tests.sh"
suite lines "config and command-line inputs" "bash tests/inputs/config_tests.sh"
suite lines "output head and loss in chunks of tokens" "bash tests/head_chunk_tests.sh"
suite lines "FP8 codes written by their producers" "bash tests/fp8_fused_tests.sh"
suite lines "grouped GEMM on CUTLASS" "bash tests/grouped_gemm_tests.sh"
suite lines "layers and sizes of the source tree" "bash tests/structure_tests.sh"
suite lines "attention on cuDNN" "bash tests/cudnn_attention_tests.sh"
suite lines "memory pre-check" "bash tests/inputs/memory_tests.sh"
suite lines "GPU rounding and the GPU check's calls, without a GPU" "bash tests/gpu_static_tests.sh"
suite lines "planned gradients against CPU ranks" "bash tests/plan_memory_tests.sh"
suite lines "Muon: resume" "bash tests/muon_tests.sh"
suite lines "Muon: checkpoints across layouts" "bash tests/muon_layout_tests.sh"

# run_suite I: suite I's output, exit status and seconds into $results/I.*; a line when it ends (progress).
run_suite() {
  local i=$1 start=$SECONDS
  bash -c "${commands[i]}" > "$results/$i.out" 2>&1
  echo $? > "$results/$i.rc"
  echo "-- ${titles[i]}: $((SECONDS - start)) s"
}
total_start=$SECONDS
for i in "${!commands[@]}"; do
  while (( $(jobs -rp | wc -l) >= lanes )); do wait -n; done
  run_suite "$i" &
done
wait
echo "-- all suites: $((SECONDS - total_start)) s on $lanes lanes"

# The counts of suite I from its output.
count_suite() {
  local i=$1 out rc p f s
  out=$(cat "$results/$i.out"); rc=$(cat "$results/$i.rc" 2>/dev/null || echo 1)
  echo "== ${titles[i]}"
  if [[ ${kinds[i]} == doctest ]]; then
    echo "$out" | grep -v '^\[doctest\] Status' | tail -n 40
    if [[ $(echo "$out" | grep '^\[doctest\] test cases:') =~ ([0-9]+)\ passed.*\|\ +([0-9]+)\ failed.*\|\ +([0-9]+)\ skipped ]]; then
      p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
    else
      p=0 f=1 s=0; echo "${titles[i]}: no summary (crashed? exit $rc)"
    fi
  else
    echo "$out"
    p=$(echo "$out" | grep -c '^PASS'); f=$(echo "$out" | grep -c '^FAIL'); s=$(echo "$out" | grep -c '^SKIP')
  fi
  [[ $rc -ne 0 && $f -eq 0 ]] && { f=1; echo "${titles[i]} exited $rc"; }
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}
for i in "${!commands[@]}"; do count_suite "$i"; done

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
