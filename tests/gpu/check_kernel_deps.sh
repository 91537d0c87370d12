#!/usr/bin/env bash
# Checks that ninja tracks the headers each CUDA kernel includes: for every kernels/*.cu, its object's
# recorded dependencies (ninja -t deps) include kernels/hd.h, which every kernel reaches. Without them
# a kernel would not rebuild after a header change (kernels/meson.build says why nvcc needs -MD -MF).
#   tests/gpu/check_kernel_deps.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source_dir=$1 build=$2
failed=0 checked=0
for cu in "$source_dir"/kernels/*.cu; do
  family=$(basename "$cu" .cu)
  object=kernels/libaccel_kernels_$family.a.p/$family.cu.o
  deps=$(ninja -C "$build" -t deps "$object" 2>&1)
  checked=$((checked + 1))
  if ! grep -q 'VALID' <<<"$deps" || ! grep -Eq '(^|/)kernels/hd\.h$' <<<"$deps"; then
    echo "FAIL: $object: ninja records no dependency on kernels/hd.h:"
    head -3 <<<"$deps"
    failed=1
  fi
done
echo "$checked kernel objects checked"
[ "$checked" -gt 0 ] || { echo "FAIL: no kernels/*.cu under $source_dir"; exit 1; }
exit $failed
