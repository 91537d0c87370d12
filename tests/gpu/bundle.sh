#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a GPU machine that has a driver, the CUDA toolkit's
# cuBLAS and NCCL but none of accel's Debian packages: the programs tests/gpu/run.sh runs, the
# shared libraries they load that are neither glibc's, the compiler's nor CUDA's, and Open MPI's
# runtime as the Debian packages this machine installed it from. The programs and libraries travel
# as BUNDLE_DIR/programs.tar.xz, the packages in BUNDLE_DIR/debs.
#   tests/gpu/bundle.sh BUILD_DIR BUNDLE_DIR
# On the GPU machine: ACCEL_GPU_BUNDLE=BUNDLE_DIR tests/gpu/run.sh OUT_DIR (docs/gpu.md).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: tests/gpu/bundle.sh BUILD_DIR BUNDLE_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
bundle=$2
programs=(tests/gpu/test_cuda_host tests/gpu/test_gpu tests/gpu/test_gpu_dist bench/gpu_kernels accel)
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "bundle.sh: $build/$p is not built" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/build" "$bundle/lib" "$bundle/debs"
bundle=$(cd "$bundle" && pwd)

# The programs and the project's own libraries, at the same paths under build/: their rpaths are
# relative to $ORIGIN.
(cd "$build" && find . -name '*.so' -not -path '*.p/*' -print0 | xargs -0 cp --parents -t "$bundle/build")
(cd "$build" && cp --parents -t "$bundle/build" "${programs[@]}")

# Libraries every Linux image has (glibc, the compiler runtime) or that the GPU machine's CUDA
# install provides stay behind; cudart is small and pins the runtime to the one we compiled with.
system_libs='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnccl|libz)\.so'
mpi_libs='^(libmpi|libopen-|libhwloc|libevent|libpmix|libfabric|libucx|libuc[mpst]|libibverbs|librdmacm|libnl-|libnuma|libpsm|libmunge|libltdl|libatomic|libudev|libuuid)'
for p in "${programs[@]}"; do
  ldd "$build/$p" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  case "$path" in "$build"/*) continue ;; esac
  if [[ "$name" =~ $system_libs ]] || [[ "$name" =~ $mpi_libs ]]; then
    continue
  fi
  cp -L "$path" "$bundle/lib/$name"
done
cp -L /usr/local/cuda/lib64/libcudart.so.13 "$bundle/lib/" 2>/dev/null || true

# Open MPI: the packages that own mpirun, its daemon, libmpi and its plugins, and the packages of
# the libraries those load, less the base system's. run.sh unpacks them on the GPU machine.
mpi_files=("$(readlink -f "$(command -v mpirun)")" "$(command -v orted)"
           "$(readlink -f /usr/lib/x86_64-linux-gnu/libmpi.so.40)")
mapfile -t plugins < <(find /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 /usr/lib/x86_64-linux-gnu/pmix2 \
  -name '*.so' 2>/dev/null)
mpi_files+=("${plugins[@]}")
mapfile -t loaded < <(for f in "${mpi_files[@]}"; do ldd "$f" 2>/dev/null | awk '/=> \//{print $3}' || true; done \
  | sort -u | xargs -r readlink -f)
mapfile -t packages < <(dpkg -S "${mpi_files[@]}" "${loaded[@]}" 2>/dev/null | cut -d: -f1 | tr ',' '\n' \
  | sed 's/^ *//' | grep -Ev '^(libc6|libstdc\+\+6|libgcc-s1|zlib1g|libudev1|libuuid1|libopenmpi-dev|libpmix-dev)$' \
  | sort -u)
packages+=(openmpi-common)
(cd "$bundle/debs" && apt-get download "${packages[@]}" >/dev/null)

# OpenBLAS alone is 30 MB: compressed, the programs and libraries fit a small upload.
tar -C "$bundle" -cf - build lib | xz -T0 -6 > "$bundle/programs.tar.xz"
rm -rf "$bundle/build" "$bundle/lib"

libraries=$(tar -tJf "$bundle/programs.tar.xz" | grep -c '^lib/.')
echo "bundle.sh: $bundle holds $(du -sh "$bundle" | cut -f1): ${#programs[@]} programs, $libraries libraries," \
  "${#packages[@]} Open MPI packages"
