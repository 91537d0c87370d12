#!/usr/bin/env bash
# Installs accel into a scratch directory, builds tests/install/consumer.cpp with nothing but
# `c++ -std=c++20 consumer.cpp $(pkg-config --cflags --libs accel)`, runs it, and checks the fit.
set -euo pipefail
build_dir="$1"
source_dir="$(cd "$(dirname "$0")" && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

meson install -C "$build_dir" --destdir "$scratch/root" --no-rebuild >/dev/null
pc="$(find "$scratch/root" -name accel.pc | head -n 1)"
[ -n "$pc" ] || { echo "accel.pc was not installed"; exit 1; }
# The .pc names the configured prefix; point it at the scratch copy of that prefix.
prefix="$(sed -n 's/^prefix=//p' "$pc")"
mkdir -p "$scratch/pc"
sed "s|^prefix=.*|prefix=$scratch/root$prefix|" "$pc" > "$scratch/pc/accel.pc"
export PKG_CONFIG_PATH="$scratch/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

c++ -std=c++20 "$source_dir/consumer.cpp" -o "$scratch/consumer" $(pkg-config --cflags --libs accel)
libdir="$(pkg-config --variable=libdir accel)"
output="$(env -u OMPI_COMM_WORLD_RANK LD_LIBRARY_PATH="$libdir" ACCEL_CONFIG_FILE=/nonexistent "$scratch/consumer")"
echo "$output"
echo "$output" | awk '/^weight/ { w = $2; b = $4 }
  END { ok = (w - 3 < 0.05 && 3 - w < 0.05 && b < 0.05 && -b < 0.05);
        if (!ok) { print "fit out of bounds: weight " w " bias " b; exit 1 } }'
