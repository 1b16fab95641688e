#!/usr/bin/env bash
# Puts OpenMPI's launcher into gpu-bundle/mpi/, so that a GPU machine without OpenMPI can run moetrain's
# multi-rank tests (ranks sharing the GPU through the staged Comm). OpenMPI finds its plugins, help texts and
# settings through the OPAL_* and PMIX_* install-dir variables; gpu-bundle/mpi/mpirun sets them from its own
# place and starts the launcher with the bundle's libraries.
#   bash scripts/bundle_mpi.sh BUNDLE_DIR     (run by `make gpu-bundle`, after bundle_libs.sh)
set -euo pipefail
dir=$1
mpi=$dir/mpi
multiarch=/usr/lib/x86_64-linux-gnu
plugins=$multiarch/openmpi/lib/openmpi3
pmix_plugins=$multiarch/pmix2/lib/pmix
for need in /usr/bin/orterun "$plugins" "$pmix_plugins" /usr/share/openmpi /etc/openmpi; do
  [[ -e $need ]] || { echo "bundle_mpi: $need is missing; install Debian's openmpi-bin" >&2; exit 1; }
done
rm -rf "$mpi"
mkdir -p "$mpi/bin" "$mpi/lib" "$mpi/share" "$mpi/etc"
cp /usr/bin/orterun "$mpi/bin/orterun"
# Left out: plugins for networks a single node never uses (they pull in UCX, libfabric, PSM, verbs), and
# those for what moetrain never calls: OpenSHMEM, MPI-IO, one-sided windows, topology mapping, monitoring.
mkdir -p "$mpi/openmpi"
for p in "$plugins"/*.so; do
  case ${p##*/} in
    *ucx* | *ofi* | *psm* | *openib* | *uct*) continue ;;
    mca_sshmem_* | mca_spml_* | mca_scoll_* | mca_memheap_* | mca_atomic_*) continue ;;
    mca_io_* | mca_fbtl_* | mca_fcoll_* | mca_fs_* | mca_sharedfp_* | mca_osc_* | mca_topo_* | *monitoring*) continue ;;
  esac
  cp "$p" "$mpi/openmpi/"
done
cp -r "$pmix_plugins" "$mpi/pmix"
cp -r /usr/share/openmpi "$mpi/share/openmpi"
[[ -d $multiarch/pmix2/share/pmix ]] && cp -r "$multiarch/pmix2/share/pmix" "$mpi/share/pmix"
cp /etc/openmpi/openmpi-mca-params.conf "$mpi/etc/"
# Sandboxed GPU machines may refuse cross-process memory reads and report no usable topology: shared-memory
# messages are copied through the segment, and ranks are not bound to cores. The launcher starts ranks on
# this node only (plm isolated), so it needs no ssh.
printf '%s\n' 'btl_vader_single_copy_mechanism = none' 'hwloc_base_binding_policy = none' 'plm = isolated' \
  >> "$mpi/etc/openmpi-mca-params.conf"

# Every library these load that the bundle does not hold yet (glibc and friends come from the host or runtime/).
runtime='^(ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so'
for f in "$mpi/bin/orterun" "$mpi"/openmpi/*.so "$mpi"/pmix/*.so; do
  while read -r name _ path _; do
    [[ -n ${path:-} && $path == /* && ! $name =~ $runtime ]] || continue
    [[ -e $dir/lib/$name || -e $mpi/lib/$name ]] || cp -L "$path" "$mpi/lib/$name"
  done < <(ldd "$f")
done

cat > "$mpi/mpirun" <<'SH'
#!/bin/bash
# OpenMPI's mpirun from moetrain's gpu-bundle: its install dirs are this folder's. Only bash's builtins
# are used, so a host needs nothing else.
here=$(cd "${0%/*}" && pwd)
export OPAL_PREFIX=$here OPAL_EXEC_PREFIX=$here OPAL_BINDIR=$here/bin OPAL_LIBDIR=$here/lib
export OPAL_PKGLIBDIR=$here/openmpi OPAL_DATADIR=$here/share OPAL_PKGDATADIR=$here/share/openmpi
export OPAL_SYSCONFDIR=$here/etc
export PMIX_PREFIX=$here PMIX_EXEC_PREFIX=$here PMIX_LIBDIR=$here/lib PMIX_PKGLIBDIR=$here/pmix
export PMIX_DATADIR=$here/share PMIX_PKGDATADIR=$here/share/pmix PMIX_SYSCONFDIR=$here/etc
export LD_LIBRARY_PATH=$here/../lib:$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$here/bin/orterun" "$@"
SH
chmod +x "$mpi/mpirun"
echo "bundle_mpi: $(du -sh "$mpi" | cut -f1) in $mpi"
