#!/usr/bin/env bash
# The one entry point for a fresh Debian 12 machine: installs what is missing, builds, then
#   ./build.sh example   runs examples/linear_regression
#   ./build.sh test      runs the whole test suite
# Both are idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")"

what="${1:-}"
case "$what" in
  example|test) ;;
  *) echo "usage: ./build.sh example|test" >&2; exit 2 ;;
esac

# Debian packages the build and the tests need (README.md says what each is for).
packages=(g++ meson ninja-build pkg-config libeigen3-dev libfmt-dev nlohmann-json3-dev libcli11-dev
          libyaml-cpp-dev doctest-dev libopenmpi-dev openmpi-bin iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build.sh: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit is not a Debian package here; when it is installed, build the CUDA backend too.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ ! -f build/build.ninja ]; then
  meson setup build
fi
ninja -C build

if [ "$what" = example ]; then
  ./build/examples/linear_regression
else
  meson test -C build --print-errorlogs
fi
