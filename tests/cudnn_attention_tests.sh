#!/usr/bin/env bash
# Attention on cuDNN without a GPU: precision.attention as a user sets it (listed, checked, ignored by the
# CPU), the parity group and benchmark lines that hold cuDNN to the CPU (skipped, saying why, on the strict
# CPU backend), and with nvcc that the build compiles cudnn-frontend's SDPA graphs from the wheels' headers
# with dynamic loading, links no libcudnn and builds the own kernels alone without the headers. One PASS or
# FAIL line per case.
set -u
cd "$(dirname "$0")/.."
source tests/expect.sh
bin=./moetrain
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect "keys lists precision.attention: auto, cudnn or own, auto by default" 0 \
  '^\| `precision.attention` \| string \| "auto" \\\| "cudnn" \\\| "own" \| `'"'auto'"'` \|' -- $bin keys

for i in $(seq 1 30); do printf 'fortune number %d\n%%\n' "$i"; done > "$tmp/quotes"
$bin prepare --input "$tmp/quotes" --out "$tmp/data" > /dev/null
python3 tests/tiny_experiment.py "$tmp" precision.attention='"cudnn"' > "$tmp/fp32.toml"
expect "precision.attention = cudnn with fp32 matmuls is refused, naming the file and the remedy" 2 \
  "fp32.toml:[0-9]+:[0-9]+: precision.attention = \"cudnn\" needs bf16 products, but precision.matmul = \"fp32\"; set \
precision.matmul = \"bf16\" or \"fp8\", or precision.attention = \"auto\"" -- $bin train "$tmp/fp32.toml" --dry-run
python3 tests/tiny_experiment.py "$tmp" precision.attention='"fast"' > "$tmp/bad.toml"
expect "an unknown precision.attention names the choices" 2 \
  'bad.toml:[0-9]+:[0-9]+: precision.attention must be one of "auto" \| "cudnn" \| "own", got "fast"' -- \
  $bin train "$tmp/bad.toml" --dry-run

# On the CPU the key changes nothing: the same losses with each choice, bf16 products.
losses() {
  python3 tests/tiny_experiment.py "$tmp" run.name="\"$1\"" precision.matmul='"bf16"' precision.attention="\"$1\"" \
    training.steps=2 > "$tmp/$1.toml"
  $bin train "$tmp/$1.toml" 2>&1 | grep -E '^step +[0-9]+/2 ' | sed 's/| lr.*//'
}
auto=$(losses auto) cudnn=$(losses cudnn) own=$(losses own)
if [[ -n $auto && $auto == "$cudnn" && $auto == "$own" ]]; then echo "PASS the CPU trains the same with each choice"
else echo "FAIL the CPU trains the same with each choice: '$auto' '$cudnn' '$own'"; fi

parity=./build/tests/gpu_parity
expect "gpu_parity --list names the cuDNN group after attention_decode" 0 "^attention_decode attention_cudnn$" -- \
  bash -c "$parity --list | grep -E '^attention_(decode|cudnn)$' | tr '\n' ' ' | sed 's/ \$//'"
expect "gpu_parity --cpu-stand-in --only attention_cudnn: skipped, saying why" 0 \
  "SKIP attention on cuDNN and on the own kernels \(the CPU stand-in has neither\).*group attention_cudnn: 0 passed, \
0 failed" -- bash -c "$parity --cpu-stand-in --only attention_cudnn | tr '\n' ' '"

if [[ -n ${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)} ]]; then
  obj=build/src/ops/attention/cudnn_sdpa.o
  expect "make: cudnn_sdpa.cu compiles against the wheels' headers, loading cuDNN at run time" 0 \
    "-DMT_CUDNN=1 -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -isystem \.venv/lib/python3[0-9.]*/site-packages/include \
-isystem \.venv/lib/python3[0-9.]*/site-packages/nvidia/cudnn/include" -- make -n -W src/ops/attention/cudnn_sdpa.cu "$obj"
  expect "make: without cudnn-frontend's headers it builds the own kernels alone" 0 "-DMT_CUDNN=0 -c" -- \
    make -n -W src/ops/attention/cudnn_sdpa.cu CUDNN_FRONTEND_INCLUDE= "$obj"
  expect "the object holds cudnn-frontend's SDPA graphs" 0 "^[1-9][0-9]*$" -- \
    bash -c "nm -C $obj | grep -c 'cudnn_frontend::graph::Graph::sdpa'"
  expect "moetrain links no libcudnn (it is opened at run time)" 0 "^0$" -- bash -c "ldd $bin | grep -c cudnn || true"
  if [[ -f gpu-bundle/BUILD_INFO ]]; then
    expect "gpu-bundle/BUILD_INFO records cudnn-frontend" 0 \
      "^cudnn    frontend 1\.32\.0 \(attention on cuDNN where libcudnn\.so\.9 loads at run time\)$" -- cat gpu-bundle/BUILD_INFO
  fi
fi
