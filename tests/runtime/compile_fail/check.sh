#!/bin/sh
# Each file here must fail to compile with exactly one error, the static_assert its first line names.
# Usage: check.sh SOURCE_ROOT BUILD_ROOT COMPILER [ARGS...]
set -u
src=$1
build=$2
shift 2
status=0
for file in "$src"/tests/runtime/compile_fail/*.cpp; do
  expected=$(sed -n '1s/.*Expected: "\(.*\)".*/\1/p' "$file")
  out=$("$@" -std=c++20 -fsyntax-only -I"$src" -I"$build" -isystem /usr/include/eigen3 "$file" 2>&1)
  errors=$(printf '%s\n' "$out" | grep -c "error:")
  if [ "$errors" != 1 ] || ! printf '%s\n' "$out" | grep "error:" | grep -qF "$expected"; then
    echo "FAILED: $(basename "$file"): expected one error saying '$expected', got $errors:"
    printf '%s\n' "$out" | grep "error:" | sed 's/^/  | /'
    status=1
  else
    echo "ok: $(basename "$file"): $expected"
  fi
done
exit $status
