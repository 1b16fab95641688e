#!/bin/sh
# Installs everything moetrain's build, demo and tests need on Debian 12 (make included, so this
# runs on a fresh machine; sudo is used when not run as root), then the Python environment of
# the PyTorch oracle (tests/oracle/), the tokenizer tests and the Hugging Face round trips
# (tests/hf/) in .venv: torch, numpy, h5py, tokenizers, transformers and safetensors from PyPI; with
# nvcc present also CUTLASS's headers (the nvidia-cutlass wheel, into .venv, where the Makefile looks for
# them), which the grouped GEMM's Hopper kernels are built from, and cudnn-frontend's and cuDNN's headers (the
# nvidia-cudnn-frontend and nvidia-cudnn-cu13 wheels), which the attention's cuDNN path is built from.
set -e
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  make g++ pkg-config libtomlplusplus-dev libcli11-dev doctest-dev libhdf5-dev hdf5-tools \
  libopenmpi-dev openmpi-bin libopenblas-dev patchelf fortunes dict-gcide librsvg2-bin python3 python3-venv \
  inotify-tools bc universal-ctags >/dev/null
echo "deps: Debian packages installed"
if ! .venv/bin/python -c "import torch, numpy, h5py, tokenizers, transformers, safetensors" 2>/dev/null; then
  echo "deps: downloading PyTorch, numpy, h5py, tokenizers, transformers and safetensors from PyPI into .venv"
  echo "      (about 5 GB with PyTorch's CUDA libraries): several minutes without output"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check torch numpy h5py tokenizers transformers safetensors
fi
echo "deps: Python environment for the PyTorch oracle in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  # The wheel's Python parts are not used, so its dependencies are not installed.
  if ! ls .venv/lib/python3*/site-packages/cutlass_library/source/include/cutlass/version.h >/dev/null 2>&1; then
    .venv/bin/pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0
  fi
  echo "deps: CUTLASS 4.2.0 headers in .venv for the CUDA build"
  # cuDNN's fused attention: cudnn-frontend's headers and cudnn.h (the nvidia-cudnn-cu13 wheel, which PyTorch's
  # CUDA build usually brings already). moetrain opens libcudnn at run time and starts without it.
  if ! ls .venv/lib/python3*/site-packages/include/cudnn_frontend.h >/dev/null 2>&1; then
    .venv/bin/pip install -q --disable-pip-version-check --no-deps nvidia-cudnn-frontend==1.32.0
  fi
  if ! ls .venv/lib/python3*/site-packages/nvidia/cudnn/include/cudnn.h >/dev/null 2>&1; then
    .venv/bin/pip install -q --disable-pip-version-check --no-deps nvidia-cudnn-cu13
  fi
  echo "deps: cudnn-frontend 1.32.0 and cuDNN headers in .venv for the CUDA build's attention"
fi
