#!/usr/bin/env bash
# The one entry point for a fresh Debian 12 machine: installs what is missing, builds, then
#   ./build.sh example   builds libaccel and examples/linear_regression only, and runs it
#   ./build.sh test      runs the whole test suite, then each fuzz harness for 30 s (as CI does)
#   ./build.sh fuzz SECONDS  builds the libFuzzer harnesses of the file readers (clang, ASan+UBSan, in
#                        build-fuzz/) and runs each for SECONDS; fails if any finds a crash
#   ./build.sh sanitize  builds the library and the CPU test suite with ASan+UBSan (g++, no CUDA, no
#                        examples or benchmarks, in build-sanitize/) and runs that suite
# All are idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")"

what="${1:-}"
case "$what" in
  example|test|sanitize) ;;
  fuzz)
    if ! [[ "${2:-}" =~ ^[1-9][0-9]*$ ]]; then
      echo "usage: ./build.sh fuzz SECONDS   (each harness runs for SECONDS)" >&2
      exit 2
    fi ;;
  *) echo "usage: ./build.sh example|test|sanitize|fuzz SECONDS" >&2; exit 2 ;;
esac

# Debian packages the build and the tests need (README.md says what each is for).
packages=(g++ meson ninja-build pkg-config libeigen3-dev libfmt-dev nlohmann-json3-dev libcli11-dev
          libyaml-cpp-dev doctest-dev libopenmpi-dev openmpi-bin iproute2 procps libopenblas-openmp-dev)
# The fuzz build's compiler, libFuzzer with the sanitizer runtimes, and clang's OpenMP.
if [ "$what" = fuzz ] || [ "$what" = test ]; then
  packages+=(clang libclang-rt-14-dev libomp-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build.sh: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  # env passes DEBIAN_FRONTEND through sudo, which would drop a plain assignment in front of it.
  "${sudo_cmd[@]}" apt-get update
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit is not a Debian package here; when it is installed, build the CUDA backend too.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if [ "$what" = fuzz ]; then
  exec tests/fuzz/run_fuzzers.sh "$2"
fi
if [ "$what" = sanitize ]; then
  exec tests/sanitize/run_sanitized_suite.sh
fi

if [ ! -f build/build.ninja ]; then
  meson setup build
fi

if [ "$what" = example ]; then
  # The example and the libraries it links, not the tests and benchmarks.
  ninja -C build examples/linear_regression
  ./build/examples/linear_regression
else
  ninja -C build
  meson test -C build --print-errorlogs
  # The readers' fuzzers, bounded: 30 s each (docs/debugging.md, "Fuzzing").
  tests/fuzz/run_fuzzers.sh 30
fi
