#!/usr/bin/env bash
# Completes gpu-bundle/ once make has linked its binaries, and writes BUILD_INFO (commit, compilers, what the
# host must provide, sizes). A GPU machine is expected to have glibc, libstdc++/libgcc and the CUDA toolkit's
# cuBLAS(Lt), and for runs over NCCL and nccl_test an NCCL 2, which the binaries open at run time (PyTorch's pip
# package nvidia-nccl has one; gpu_check.sh finds it):
#   lib/      every other shared library the binaries load (found through their $ORIGIN/lib rpath);
#   runtime/  this machine's glibc, libstdc++ and libgcc_s with their loader, for a GPU machine whose own are
#             older than the binaries need (scripts/gpu_check.sh starts the binaries through it then).
#   bash scripts/bundle_libs.sh BUNDLE_DIR NVCC "NVCCFLAGS" [CUTLASS_INCLUDE [CUDNN_FRONTEND_INCLUDE]]
# (run by `make gpu-bundle`)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1 nvcc=$2 nvccflags=$3 cutlass_include=${4:-} frontend_include=${5:-}
# CUTLASS's version from its headers: the grouped GEMM's Hopper kernels are built from them, or are absent.
cutlass="absent: the grouped GEMM runs one cuBLASLt call per group"
if [[ -f $cutlass_include/cutlass/version.h ]]; then
  cutlass=$(awk '/#define CUTLASS_(MAJOR|MINOR|PATCH) / { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$cutlass_include/cutlass/version.h")
  cutlass="$cutlass (grouped GEMM kernels, bf16 and FP8, sm_90a)"
fi
# cudnn-frontend's version from its headers: attention's cuDNN path is built from them, or is absent.
cudnn="absent: attention runs on the own kernels"
if [[ -f $frontend_include/cudnn_frontend_version.h ]]; then
  cudnn=$(awk '/#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION / { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$frontend_include/cudnn_frontend_version.h")
  cudnn="frontend $cudnn (attention on cuDNN where libcudnn.so.9 loads at run time)"
fi
bins=("$dir/moetrain" "$dir/gpu_parity" "$dir/nccl_test" "$dir/gemm_bench" "$dir/attention_bench")
runtime='^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so'
cuda='^(libcublasLt|libcublas)\.so'
mkdir -p "$dir/lib" "$dir/runtime"

# ldd lists the whole dependency closure, so one pass over the binaries finds every library.
for bin in "${bins[@]}"; do
  while read -r name _ path _; do
    [[ $name == /* ]] && { path=$name; name=${name##*/}; }  # the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
    [[ -n $path && $path != \(* ]] || continue              # linux-vdso: no file
    if [[ $path == not ]]; then
      echo "bundle_libs: $bin needs $name, which the loader cannot find here; install its -dev package" >&2
      exit 1
    fi
    if [[ $name =~ $cuda || $(realpath "$path") == "$(realpath "$dir")"/* ]]; then continue
    elif [[ $name =~ $runtime ]]; then cp -L "$path" "$dir/runtime/$name"
    else cp -L "$path" "$dir/lib/$name"
    fi
  done < <(ldd "$bin")
done

# OpenMPI's libraries carry a RUNPATH to Debian's openmpi/lib, which would hide the binaries' rpath from their
# own dependencies; pointing it at their own folder keeps the search inside the bundle.
command -v patchelf >/dev/null || { echo "bundle_libs: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
for f in "$dir"/lib/*; do
  if [[ -n $(patchelf --print-rpath "$f") ]]; then patchelf --set-rpath '$ORIGIN' "$f"; fi
done

# The newest symbol versions the binaries and bundled libraries ask of the host's glibc and libstdc++.
newest() { objdump -T "${bins[@]}" "$dir"/lib/*.so* | grep -o "$1_[0-9.]*" | sort -uV | tail -n 1; }
{
  echo "commit   $(git describe --always --dirty 2>/dev/null || echo 'unknown (not a git checkout)')"
  echo "built    $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "compiler $(${CXX:-g++} --version | head -n 1); nvcc $("$nvcc" --version | grep -o 'release [0-9.]*')"
  echo "nvcc     $nvccflags"
  echo "cutlass  $cutlass"
  echo "cudnn    $cudnn"
  echo "needs    $(newest GLIBC), $(newest GLIBCXX), libcublasLt.so.13 and libcublas.so.13, a driver for CUDA 13 (cudart is static),"
  echo "         and for runs over NCCL and nccl_test libnccl.so.2 2.18.1 or newer (the CUDA toolkit's, or PyTorch's"
  echo "         nvidia-nccl package), opened at run time where the loader finds it (LD_LIBRARY_PATH, the system's"
  echo "         folders, ${nvcc%/bin/nvcc}/lib64) or where MOETRAIN_NCCL_LIBRARY names it;"
  echo "         for attention on cuDNN libcudnn.so.9 (PyTorch's nvidia-cudnn-cu13 package; else the own kernels) and"
  echo "         libcudart.so.13 (which cudnn-frontend opens), found the same way or named in MOETRAIN_CUDNN_LIBRARY;"
  echo "         runtime/ holds glibc $(ldd --version | head -n 1 | grep -o '[0-9.]*$') for hosts with an older one"
  echo "size     $(du -sh "$dir" | cut -f1) in all"
  (cd "$dir" && du -b moetrain gpu_parity nccl_test gemm_bench attention_bench lib/* runtime/*)
} > "$dir/BUILD_INFO"
cat "$dir/BUILD_INFO"
