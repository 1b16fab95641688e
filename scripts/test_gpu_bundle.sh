#!/usr/bin/env bash
# Proves gpu-bundle/ (make gpu-bundle) needs nothing a GPU machine lacks: runs it in a chroot that holds only
# the bundle, the dynamic loader, glibc, libstdc++, libgcc_s, the CUDA toolkit's cuBLAS(Lt), and bash. There,
# with no GPU and no NCCL, moetrain tokenizes text and trains configs/tiny.toml on CPU with the very losses ./moetrain
# gets here, gpu_parity and nccl_test exit 77 (skipped), gemm_bench times the CPU, attention_bench skips, the bundle's
# mpirun starts two ranks, and parallel.comm = "nccl" is refused with a user error. Then, with this machine's NCCL
# added, the binaries load it: nccl_test skips for want of a GPU only, and so does parallel.comm = "nccl".
# Needs root, or user namespaces.
# Prints one PASS/FAIL/SKIP line per check; exits non-zero when one fails.
#   bash scripts/test_gpu_bundle.sh
set -u
cd "$(dirname "$0")/.."
bundle=gpu-bundle
failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }

if [[ ! -x ./moetrain ]]; then
  echo "FAIL gpu bundle: ./moetrain is missing; run make first"
  exit 1
fi
if ! ldd ./moetrain | grep -q libcublasLt; then
  echo "SKIP gpu bundle: this build has no CUDA (make gpu-bundle needs nvcc)"
  exit 0
fi
if [[ ! -x $bundle/moetrain ]]; then
  echo "FAIL gpu bundle: $bundle/moetrain is missing; run make gpu-bundle"
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/proc"
# The loader resolves $ORIGIN through /proc/self/exe: the chroot gets its own /proc, in mount and pid
# namespaces that take it away when the command ends; as root, or else in a user namespace.
jail=()
for ns in "--pid" "--map-root-user --pid"; do
  read -ra ns <<<"$ns --fork --mount-proc=$root/proc"
  if unshare "${ns[@]}" true 2>/dev/null; then jail=(unshare "${ns[@]}" chroot "$root"); break; fi
done
if [[ ${#jail[@]} -eq 0 ]]; then
  echo "SKIP gpu bundle in a chroot: unshare cannot make mount and pid namespaces here (needs root with" \
    "CAP_SYS_ADMIN, or user namespaces)"
  exit 0
fi
text=(src/config src/io src/model src/train)  # some of the repository's files as training text

# The host side of the chroot: exactly the libraries a GPU machine provides, at the system's paths. Hard
# links where possible: cuBLASLt is half a gigabyte.
mkdir -p "$root/lib64" "$root/lib/x86_64-linux-gnu" "$root/work/text" "$root/tmp"
provided='^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcublasLt|libcublas)\.so'
files=("$bundle"/moetrain "$bundle"/gpu_parity "$bundle"/nccl_test "$bundle"/gemm_bench "$bundle"/attention_bench
  "$bundle"/lib/*)
if linked=$(for f in "${files[@]}"; do ldd "$f"; done | grep -o 'libnccl[^ ]*' | sort -u | grep .); then
  fail "the bundle links $linked: NCCL must be opened at run time, when a run asks for it"
else pass "no binary of the bundle links libnccl"; fi
for f in "${files[@]}"; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $1 ~ /^\// { print $1, $1 }' | sort -u |
  while read -r name path; do
    name=${name##*/}
    [[ $name =~ $provided ]] || continue
    dest=$root/lib/x86_64-linux-gnu/$name
    [[ $name == ld-linux* ]] && dest=$root/lib64/$name
    ln -f "$(realpath "$path")" "$dest" 2>/dev/null || cp -L "$path" "$dest"
  done
# bash, which a GPU machine has, for gpu-bundle/mpi/mpirun.
mkdir -p "$root/bin"
cp /bin/bash "$root/bin/bash"
ldd /bin/bash | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
  [[ -e $root/lib/x86_64-linux-gnu/${lib##*/} ]] || cp -L "$lib" "$root/lib/x86_64-linux-gnu/"
done
cp -r "$bundle" configs "$root/work/"
for d in "${text[@]}"; do cp -r "$d" "$root/work/text/"; done
echo "chroot holds: $(cd "$root" && find lib lib64 -type f | sort | tr '\n' ' ')"

run=(--set training.steps=5 --set log.every=1 --set checkpoint.resume=never)
data=(--set data.train=/work/data/train_000000.bin --set data.val=/work/data/val_000000.bin)

inputs=(); for d in "${text[@]}"; do inputs+=(--input "/work/text/${d##*/}"); done
if out=$("${jail[@]}" /work/gpu-bundle/moetrain prepare "${inputs[@]}" --out /work/data 2>&1); then
  pass "chroot: moetrain prepare"
else
  fail "chroot: moetrain prepare"; echo "$out" | tail -5
fi

out=$("${jail[@]}" /work/gpu-bundle/moetrain train /work/configs/tiny.toml "${run[@]}" "${data[@]}" \
  --set run.out_dir=/work/runs --set run.name=bundle 2>&1); rc=$?
echo "$out" | grep -E '^ +device|^done'
if [[ $rc -eq 0 ]] && grep -q '^done: 5 steps' <<<"$out"; then pass "chroot: moetrain train tiny.toml, 5 steps on CPU"
else fail "chroot: moetrain train tiny.toml (exit $rc)"; echo "$out" | tail -5; fi

# The same run with the normal build outside: the bundled OpenBLAS subset must compute the same losses.
mkdir -p "$root/host"
./moetrain train configs/tiny.toml "${run[@]}" --set data.train="$root/work/data/train_000000.bin" \
  --set data.val="$root/work/data/val_000000.bin" --set run.out_dir="$root/host" --set run.name=host >/dev/null 2>&1
losses() { h5dump -d /loss -y -w 0 -m %.9g "$1" 2>/dev/null | grep -E '^ *[0-9]' | tr -d ' \n'; }
a=$(losses "$root/work/runs/bundle/log.h5") b=$(losses "$root/host/host/log.h5")
if [[ -n $a && $a == "$b" ]]; then pass "chroot run's losses equal ./moetrain's ($a)"
else fail "chroot run's losses ($a) differ from ./moetrain's ($b)"; fi

out=$("${jail[@]}" /work/gpu-bundle/gpu_parity 2>&1); rc=$?
echo "$out" | tail -n 1
if [[ $rc -eq 77 ]]; then pass "chroot: gpu_parity skips without a GPU (exit 77)"
else fail "chroot: gpu_parity exited $rc, wanted 77 (skipped)"; fi

# The bundle's own OpenMPI launcher, with no OpenMPI in the chroot: two data-parallel ranks, as
# scripts/gpu_check.sh runs the layout matrix.
out=$("${jail[@]}" /work/gpu-bundle/mpi/mpirun --allow-run-as-root --oversubscribe -np 2 /work/gpu-bundle/moetrain \
  train /work/configs/tiny.toml "${run[@]}" "${data[@]}" --set parallel.dp=2 --set run.out_dir=/work/runs \
  --set run.name=bundle-2ranks 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q '^done: 5 steps' <<<"$out"; then pass "chroot: gpu-bundle/mpi/mpirun runs 2 ranks of moetrain"
else fail "chroot: gpu-bundle/mpi/mpirun -np 2 moetrain train (exit $rc)"; echo "$out" | tail -5; fi

out=$("${jail[@]}" /work/gpu-bundle/gemm_bench 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q 'GPU part skipped' <<<"$out"; then pass "chroot: gemm_bench times the CPU, skips the GPU"
else fail "chroot: gemm_bench (exit $rc)"; echo "$out" | tail -3; fi
out=$("${jail[@]}" /work/gpu-bundle/attention_bench 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q 'skipped: no GPU' <<<"$out"; then pass "chroot: attention_bench starts and skips without a GPU"
else fail "chroot: attention_bench (exit $rc)"; echo "$out" | tail -3; fi

# NCCL asked for where there is none: a user error, before any work.
out=$("${jail[@]}" /work/gpu-bundle/moetrain train /work/configs/tiny.toml "${run[@]}" "${data[@]}" \
  --set run.out_dir=/work/runs --set run.name=bundle-nccl --set parallel.comm='"nccl"' 2>&1); rc=$?
if [[ $rc -eq 2 ]] && grep -q 'NCCL cannot be loaded: libnccl.so.2 could not be loaded' <<<"$out"; then
  pass "chroot: parallel.comm = \"nccl\" without NCCL is a user error (exit 2)"
else fail "chroot: parallel.comm = \"nccl\" without NCCL exited $rc, wanted 2 and the library named"; echo "$out" | tail -3; fi
out=$("${jail[@]}" /work/gpu-bundle/nccl_test 2>&1); rc=$?
if [[ $rc -eq 77 ]] && grep -q 'skipped: no NCCL (libnccl.so.2 could not be loaded' <<<"$out"; then
  pass "chroot: nccl_test skips without NCCL (exit 77)"
else fail "chroot: nccl_test without NCCL exited $rc, wanted 77 (skipped: no NCCL)"; echo "$out" | tail -3; fi

# The fallback scripts/gpu_check.sh uses on hosts with an older glibc: the bundle's own runtime and loader.
out=$("${jail[@]}" /work/gpu-bundle/runtime/ld-linux-x86-64.so.2 --library-path /work/gpu-bundle/runtime \
  /work/gpu-bundle/moetrain keys 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q 'run.name' <<<"$out"; then pass "chroot: moetrain through the bundled runtime/"
else fail "chroot: moetrain through the bundled runtime/ (exit $rc)"; echo "$out" | tail -3; fi

# This machine's NCCL added where a GPU machine's system keeps libraries: the binaries open it, and stop only
# for want of a GPU. It is the one the bundle's rpath finds here.
nccl=$(readelf -d "$bundle/moetrain" | sed -n 's/.*RPATH.*\[\(.*\)\]/\1/p' | tr ':' '\n' |
  while read -r d; do [[ -e $d/libnccl.so.2 ]] && echo "$d/libnccl.so.2"; done | head -n 1)
if [[ -z $nccl ]]; then
  echo "SKIP chroot with NCCL: no libnccl.so.2 in $bundle/moetrain's rpath on this machine"
else
  ln -f "$(realpath "$nccl")" "$root/lib/x86_64-linux-gnu/libnccl.so.2" 2>/dev/null ||
    cp -L "$nccl" "$root/lib/x86_64-linux-gnu/libnccl.so.2"
  out=$("${jail[@]}" /work/gpu-bundle/nccl_test 2>&1); rc=$?
  echo "$out" | tail -n 1
  if [[ $rc -eq 77 ]] && grep -q 'skipped: no GPU' <<<"$out"; then pass "chroot with $nccl: nccl_test loads it, skips without a GPU"
  else fail "chroot with $nccl: nccl_test exited $rc, wanted 77 (skipped: no GPU)"; fi
  out=$("${jail[@]}" /work/gpu-bundle/moetrain train /work/configs/tiny.toml "${run[@]}" "${data[@]}" \
    --set run.out_dir=/work/runs --set run.name=bundle-nccl --set parallel.comm='"nccl"' 2>&1); rc=$?
  if [[ $rc -eq 2 ]] && grep -q 'parallel.comm = "nccl" needs each rank on a GPU' <<<"$out"; then
    pass "chroot with $nccl: parallel.comm = \"nccl\" loads it, then asks for a GPU (exit 2)"
  else fail "chroot with $nccl: parallel.comm = \"nccl\" exited $rc, wanted 2 (needs a GPU)"; echo "$out" | tail -3; fi
fi

if readelf -d "$bundle/moetrain" | grep -q 'RPATH.*\$ORIGIN/lib'; then pass "rpath is DT_RPATH \$ORIGIN/lib"
else fail "$bundle/moetrain has no DT_RPATH \$ORIGIN/lib (libraries of lib/ would not be found)"; fi
# A device call carries the working tree (about 4 MiB) and gpu-bundle.tgz within 64 MiB; the bundle itself (the
# binaries, each with cudnn-frontend's attention graphs and CUTLASS's kernels, lib/, runtime/, mpi/) is 61 MiB,
# a third of that compressed. 48 MiB leaves the tree room to grow.
mib=$(( $(du -sb "$bundle" | cut -f1) / 1048576 ))
tgz_mib=$(( $(stat -c %s "$bundle.tgz" 2>/dev/null || echo 0) / 1048576 ))
if [[ ! -s $bundle.tgz ]]; then fail "$bundle.tgz is missing (make gpu-bundle writes it)"
elif [[ $tgz_mib -lt 48 ]]; then pass "$bundle.tgz is $tgz_mib MiB (under 48; the folder $mib MiB)"
else fail "$bundle.tgz is $tgz_mib MiB, over 48 (the folder $mib MiB)"; fi
unpacked=$(mktemp -d)
if tar -xzf "$bundle.tgz" -C "$unpacked" && diff -r "$bundle" "$unpacked/$bundle" > /dev/null; then
  pass "$bundle.tgz unpacks to $bundle/, file for file"
else fail "$bundle.tgz does not unpack to $bundle/ as it is (run make gpu-bundle again)"; fi
rm -rf "$unpacked"
exit $failed
