#!/usr/bin/env bash
# Installs accel into a scratch root as `meson install` does for a user, then, with no LD_LIBRARY_PATH
# and with pkg-config reading the installed accel.pc (its prefix moved to where it was installed, as a
# real install would have it), builds tests/install/consumer.cpp with `c++ -std=c++20 consumer.cpp $(pkg-config --cflags
# --libs accel)` and runs it, and runs the installed `accel env`. Both must find libaccel.so by
# themselves: a program the loader cannot satisfy exits 127, and that fails this check.
set -euo pipefail
build_dir="$1"
source_dir="$(cd "$(dirname "$0")" && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
unset LD_LIBRARY_PATH

meson install -C "$build_dir" --destdir "$scratch/root" --no-rebuild >/dev/null
pc="$(find "$scratch/root" -name accel.pc | head -n 1)"
[ -n "$pc" ] || { echo "accel.pc was not installed"; exit 1; }
case "$pc" in
  */lib/pkgconfig/accel.pc) ;;
  *) echo "accel.pc is at ${pc#"$scratch/root"}: expected PREFIX/lib/pkgconfig, where pkg-config and the loader look"; exit 1 ;;
esac
accel="$(find "$scratch/root" -path '*/bin/accel' -type f | head -n 1)"
[ -n "$accel" ] || { echo "the accel executable was not installed"; exit 1; }

prefix="$(sed -n 's/^prefix=//p' "$pc")"
mkdir -p "$scratch/pc"
sed "s|^prefix=.*|prefix=$scratch/root$prefix|" "$pc" > "$scratch/pc/accel.pc"
flags="$(PKG_CONFIG_PATH="$scratch/pc" pkg-config --cflags --libs accel)" ||
  { echo "pkg-config --cflags --libs accel failed"; exit 1; }
c++ -std=c++20 "$source_dir/consumer.cpp" -o "$scratch/consumer" $flags

if ! output="$(env -u OMPI_COMM_WORLD_RANK ACCEL_CONFIG_FILE=/nonexistent "$scratch/consumer" 2>&1)"; then
  echo "the consumer did not run without LD_LIBRARY_PATH:"
  echo "$output"
  exit 1
fi
echo "$output" | tail -n 1
if ! report="$(env -u OMPI_COMM_WORLD_RANK ACCEL_CONFIG_FILE=/nonexistent "$accel" env 2>&1)"; then
  echo "the installed accel env did not run without LD_LIBRARY_PATH:"
  echo "$report"
  exit 1
fi
echo "$report" | head -n 1
