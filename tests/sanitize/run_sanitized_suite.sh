#!/usr/bin/env bash
# ./build.sh sanitize: builds libaccel, the tools and the CPU test suite with ASan+UBSan in
# build-sanitize/ (g++, no CUDA, no examples or benchmarks) and runs that suite, mpirun tests included.
# Any sanitizer report fails its test; docs/debugging.md ("Sanitizers") says how to read one.
# Extra arguments go to `meson test` (e.g. a suite's or a test's name, to run only that).
set -euo pipefail
cd "$(dirname "$0")/../.."
here="$PWD/tests/sanitize"

if [ ! -f build-sanitize/build.ninja ]; then
  # b_lundef=false: libaccel.so leaves the sanitizer runtimes' symbols to the executables that load it.
  # -fno-sanitize-recover=undefined: UBSan aborts at its first report, so undefined behaviour fails
  # the test instead of printing a line that nobody reads. native_arch=false: GCC 12 reports its own
  # AVX-512 intrinsics as uninitialized under -fsanitize (bug 105593); accel's only code per
  # instruction set, the AVX-512 activation loops, is then left out, and the normal suite checks it
  # bit for bit against the portable loops this build does check. NCCL needs CUDA.
  # -O1 -g1 (line tables only): what ASan's documentation recommends, and faster to compile than -O2 -g
  # on Eigen's templates; the reports still name file:line.
  meson setup build-sanitize -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=plain \
    -Dcpp_args="['-O1', '-g1', '-fno-sanitize-recover=undefined', '-fno-omit-frame-pointer']" \
    -Dnative_arch=false -Dcuda=disabled -Dnccl=disabled -Dexamples=false -Dbenchmarks=false
fi
ninja -C build-sanitize

# ASan: abort (not just exit 1) so mpirun and the tests see a crash. Leak checking is on, with Open
# MPI's own leaks at exit suppressed (lsan.supp says which and why); fast_unwind_on_malloc=0 gives
# those suppressions whole allocation stacks through Open MPI, which has no frame pointers.
# allocator_may_return_null=1: an allocation too large to meet returns null, as glibc's does, so the
# tests that check it becomes an accel::Error (tests/tensor/test_sizes.cpp) see that path.
# verify_asan_link_order=0: the install tests run programs that load the sanitized libaccel.so
# without being built with ASan themselves (pkg-config consumers), where the runtime comes second.
export ASAN_OPTIONS="abort_on_error=1:halt_on_error=1:allocator_may_return_null=1:detect_leaks=1:fast_unwind_on_malloc=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1:verify_asan_link_order=0"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
# The tests' own timeouts are for the plain build, and ASan with the slow unwinder runs several times
# slower: meson's timeouts and the multi-rank tests' watchdogs (tests/mpi_doctest_main.cpp) grow alike.
export ACCEL_TEST_WATCHDOG_SCALE=3
meson test -C build-sanitize --print-errorlogs --timeout-multiplier 3 "$@"
