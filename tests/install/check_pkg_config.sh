#!/usr/bin/env bash
# Installs accel into a scratch directory, checks that what it installs is the training API only (no
# tool headers, nothing that needs CLI11 or yaml-cpp), builds tests/install/consumer.cpp with nothing but
# `c++ -std=c++20 consumer.cpp $(pkg-config --cflags --libs accel)` where CLI11's and yaml-cpp's .pc
# files cannot be found, runs it, and checks the fit.
set -euo pipefail
build_dir="$1"
source_dir="$(cd "$(dirname "$0")" && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

meson install -C "$build_dir" --destdir "$scratch/root" --no-rebuild >/dev/null
pc="$(find "$scratch/root" -name accel.pc | head -n 1)"
[ -n "$pc" ] || { echo "accel.pc was not installed"; exit 1; }
include_root="$(find "$scratch/root" -type d -path '*/include/accel' | head -n 1)"
[ -n "$include_root" ] || { echo "no include/accel directory was installed"; exit 1; }

# The accel executable's parts (runtime/cli) and the `accel bench` code (bench/) are not installed.
tool_headers="$(cd "$include_root" && find . -type f \( -path './runtime/cli/*' -o -path './bench/*' \
  -o -name launch.h -o -name rendezvous.h -o -name env_report.h -o -name self_test.h -o -name config_wizard.h \
  -o -name check_list.h -o -name collective_checks.h -o -name training_checks.h \) -print)"
if [ -n "$tool_headers" ]; then
  echo "tool headers are installed with libaccel (they belong to the accel executable):"
  echo "$tool_headers"
  exit 1
fi
# No installed header may include CLI11 or yaml-cpp: those are the CLI's and libaccel's private business.
leaking="$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](CLI/|CLI11|yaml-cpp/)' "$include_root" || true)"
if [ -n "$leaking" ]; then
  echo "installed headers include CLI11 or yaml-cpp headers:"
  echo "$leaking" | sed "s|^$include_root/|  |"
  exit 1
fi
# Nor may accel.pc require them: Requires makes every consumer build against them, and Requires.private
# still makes `pkg-config --cflags accel` fail wherever their .pc files are missing.
requires="$(grep -E '^Requires(\.private)?:' "$pc" || true)"
if echo "$requires" | grep -qiE '(^|[:, ])(CLI11|yaml-cpp)([ ,<>=]|$)'; then
  echo "accel.pc requires CLI11 or yaml-cpp:"
  echo "$requires"
  exit 1
fi

# The .pc names the configured prefix; point it at the scratch copy of that prefix.
prefix="$(sed -n 's/^prefix=//p' "$pc")"
mkdir -p "$scratch/pc"
sed "s|^prefix=.*|prefix=$scratch/root$prefix|" "$pc" > "$scratch/pc/accel.pc"
# Every other .pc file pkg-config would find, except CLI11's and yaml-cpp's, in search order (the first
# of a name wins), so that the consumer's line cannot resolve through them.
mkdir -p "$scratch/system-pc"
search_path="${PKG_CONFIG_PATH:+$PKG_CONFIG_PATH:}$(pkg-config --variable pc_path pkg-config)"
IFS=: read -r -a pc_dirs <<< "$search_path"
for dir in "${pc_dirs[@]}"; do
  for f in "$dir"/*.pc; do
    [ -f "$f" ] || continue
    name="$(basename "$f")"
    case "$name" in CLI11.pc | yaml-cpp.pc) continue ;; esac
    [ -e "$scratch/system-pc/$name" ] || cp "$f" "$scratch/system-pc/$name"
  done
done
export PKG_CONFIG_PATH="$scratch/pc" PKG_CONFIG_LIBDIR="$scratch/system-pc"

flags="$(pkg-config --cflags --libs accel)" || { echo "pkg-config --cflags --libs accel failed"; exit 1; }
c++ -std=c++20 "$source_dir/consumer.cpp" -o "$scratch/consumer" $flags
libdir="$(pkg-config --variable=libdir accel)"
output="$(env -u OMPI_COMM_WORLD_RANK LD_LIBRARY_PATH="$libdir" ACCEL_CONFIG_FILE=/nonexistent "$scratch/consumer")"
echo "$output"
echo "$output" | awk '/^weight/ { w = $2; b = $4 }
  END { ok = (w - 3 < 0.05 && 3 - w < 0.05 && b < 0.05 && -b < 0.05);
        if (!ok) { print "fit out of bounds: weight " w " bias " b; exit 1 } }'
