#!/usr/bin/env bash
# The GPU check, in one call: builds accel with CUDA (sm_90 by default) in its own build dir, runs the
# CUDA tests (single process, then the multi-rank ones under mpirun: 1 rank, and 2 ranks that share
# the GPU when there is one) and the GPU benchmarks, and writes OUT_DIR/gpu_check.log (everything
# printed) and OUT_DIR/gpu_check.json (each test's status, each benchmark's numbers, a verdict).
#   tests/gpu/run.sh OUT_DIR
# Exit status 0 only when the build succeeds, every GPU test ran and passed and every benchmark
# requirement is met. Without a GPU it still builds and runs: every GPU test is reported skipped,
# never passed, and the script exits 77 (1 when something failed).
# Environment: ACCEL_GPU_ARCHS (default 90), ACCEL_GPU_BUILD_DIR (default build-gpu, reused when it
# exists), ACCEL_GPU_REUSE=1 (build in that dir with the options it has, e.g. a CPU machine's own
# build dir), ACCEL_GPU_JOBS (default: all cores), ACCEL_GPU_BUNDLE (a folder tests/gpu/bundle.sh
# made on another machine: run its programs, build nothing). docs/gpu.md explains the output.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: tests/gpu/run.sh OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ACCEL_GPU_BUILD_DIR:-$root/build-gpu}
archs=${ACCEL_GPU_ARCHS:-90}
jobs=${ACCEL_GPU_JOBS:-$(nproc)}
log=$out/gpu_check.log
results=$out/tests.jsonl
bench_json=$out/bench.json
rm -f "$log" "$results" "$bench_json" "$out/gpu_check.json"
exec > >(tee "$log") 2>&1
tee_pid=$!

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
section() { printf '\n=== %s (%ss)\n' "$1" "$SECONDS"; }

# Points the run at a bundle from tests/gpu/bundle.sh: its programs become the build, its libraries
# come first, then this machine's CUDA libraries (the toolkit's, else the pip wheels'). Open MPI is
# unpacked from its packages and, as root, added to / without replacing any file already there.
use_bundle() {
  local bundle
  bundle=$(cd "$1" && pwd) || return 1
  local programs=/tmp/accel-bundle
  rm -rf "$programs" && mkdir -p "$programs" && tar -C "$programs" -xJf "$bundle/programs.tar.xz" || return 1
  build=$programs/build
  echo "running the programs bundled in $bundle (built elsewhere; nothing is built here)"
  local cuda_dirs
  cuda_dirs=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(f) for p in nvidia.__path__ for f in glob.glob(p + "/**/lib*.so*", recursive=True)})))' \
    2>/dev/null || true)
  export LD_LIBRARY_PATH="$programs/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ldd "$build/tests/gpu/test_gpu_dist" | grep -q 'libmpi.*not found'; then
    local root=/tmp/accel-openmpi
    rm -rf "$root"
    for deb in "$bundle"/debs/*.deb; do dpkg-deb -x "$deb" "$root" || return 1; done
    if [ -w / ]; then
      # Merged-/usr images have /lib as a link into /usr: copy through /usr so cp never meets it.
      if [ -L /lib ] && [ -d "$root/lib" ]; then cp -rn "$root/lib/." "$root/usr/lib/" && rm -rf "$root/lib"; fi
      cp -rn "$root/." / && ldconfig || return 1
      [ -e /usr/bin/mpirun ] || ln -s mpirun.openmpi /usr/bin/mpirun
    else
      export OPAL_PREFIX=$root/usr PMIX_MCA_mca_base_component_path=$root/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix PATH="$root/usr/bin:$PATH"
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu"
      [ -e "$root/usr/bin/mpirun" ] || ln -s mpirun.openmpi "$root/usr/bin/mpirun"
    fi
    # Shared memory between the ranks of one machine; no network fabrics are there to probe.
    export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
    echo "Open MPI unpacked from $(ls "$bundle"/debs/*.deb | wc -l) packages: $(command -v mpirun)"
  fi
  ! ldd "$build"/tests/gpu/test_gpu{,_dist} | grep 'not found'
}

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

section "machine"
echo "started $started on $(hostname), $(nproc) cores; building for sm_$archs with $jobs jobs in $build"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv || true
else
  echo "nvidia-smi: not found"
fi
nvcc --version | tail -2 || echo "nvcc: not found"
c++ --version | head -1
echo "meson $(meson --version 2>/dev/null || echo 'not found'), ninja $(ninja --version 2>/dev/null || echo 'not found')"
device_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)

section "build"
build_ok=true
build_start=$SECONDS
if [ -n "${ACCEL_GPU_BUNDLE:-}" ]; then
  use_bundle "$ACCEL_GPU_BUNDLE" || build_ok=false
# -Dwerror=false: warnings are CI's job (on the compiler CI uses); here a newer g++'s new warning
# must not cost the GPU window. The targets are only what this check runs.
elif [ -f "$build/build.ninja" ] && [ "${ACCEL_GPU_REUSE:-0}" = 1 ]; then
  echo "reusing $build as it is configured (ACCEL_GPU_REUSE=1)"
elif [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" -Dcuda=enabled -Dgpu_archs="$archs" -Dwerror=false -Dbuildtype=release \
    || build_ok=false
else
  meson setup "$build" "$root" -Dcuda=enabled -Dgpu_archs="$archs" -Dwerror=false -Dbuildtype=release \
    || build_ok=false
fi
if $build_ok && [ -z "${ACCEL_GPU_BUNDLE:-}" ]; then
  targets=(tests/gpu/test_cuda_host tests/gpu/test_gpu bench/gpu_kernels accel)
  # test_gpu_dist exists when the build found MPI.
  if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^tests/gpu/test_gpu_dist:'; then
    targets+=(tests/gpu/test_gpu_dist)
  fi
  ninja -C "$build" -j "$jobs" "${targets[@]}" || build_ok=false
fi
build_seconds=$((SECONDS - build_start))
echo "build: $($build_ok && echo ok || echo FAILED) in ${build_seconds}s"

# Runs one executable with a time limit; prints and records its exit status.
declare -A status
run_step() {
  local name=$1 limit=$2
  shift 2
  section "$name"
  timeout --signal=KILL "$limit" "$@"
  local rc=$?
  status[$name]=$rc
  case $rc in
    0) echo "$name: ok" ;;
    77) echo "$name: skipped (no GPU)" ;;
    137) echo "$name: KILLED after ${limit}s" ;;
    *) echo "$name: FAILED with exit status $rc" ;;
  esac
}

if $build_ok; then
  export ACCEL_TEST_RESULTS=$results
  run_step test_cuda_host 60 "$build/tests/gpu/test_cuda_host"
  run_step test_gpu 180 "$build/tests/gpu/test_gpu"
  if [ -x "$build/tests/gpu/test_gpu_dist" ] && command -v mpirun >/dev/null 2>&1; then
    mpi_args=(--oversubscribe --bind-to none)
    [ "$(id -u)" = 0 ] && mpi_args+=(--allow-run-as-root)
    # One rank (the mpi and nccl backends, and the Accelerator on nccl), then two ranks: with one GPU
    # they share it through the mpi backend; with two or more, each has its own and nccl runs too.
    for np in 1 2; do
      run_step "test_gpu_dist_np$np" 90 env OMP_NUM_THREADS=2 mpirun -np "$np" "${mpi_args[@]}" "$build/tests/gpu/test_gpu_dist"
    done
  else
    section "test_gpu_dist"
    echo "test_gpu_dist: not built (no MPI) or no mpirun: the multi-rank GPU tests did not run"
    status[test_gpu_dist]=1
  fi
  unset ACCEL_TEST_RESULTS
  run_step gpu_kernels 150 "$build/bench/gpu_kernels" --json "$bench_json"
  # accel bench precision on the GPU (docs/benchmarks.md): GEMM, bandwidth and training-step rows next
  # to the published peaks. Without a GPU there is no device to measure, so it does not run.
  if [ -n "$device_name" ]; then
    run_step bench_precision 240 "$build/accel" bench precision --devices cuda:0 --gemm-sizes 2048,8192 \
      --elements 67108864 --json "$out/precision.json"
  fi
fi

section "summary"
status_json="{"
sep=""
for name in "${!status[@]}"; do
  status_json+="$sep\"$name\": ${status[$name]}"
  sep=", "
done
status_json+="}"

python3 - "$out" "$started" "$device_name" "$build_ok" "$build_seconds" "$status_json" <<'EOF'
import json, os, sys
out, started, device, build_ok, build_seconds, status_json = sys.argv[1:7]
status = json.loads(status_json)
tests = []
path = os.path.join(out, "tests.jsonl")
if os.path.exists(path):
    with open(path) as f:
        tests = [json.loads(line) for line in f if line.strip()]
precision = None
path = os.path.join(out, "precision.json")
if os.path.exists(path):
    with open(path) as f:
        precision = json.load(f)
bench = None
path = os.path.join(out, "bench.json")
if os.path.exists(path):
    with open(path) as f:
        bench = json.load(f)
counts = {s: sum(1 for t in tests if t["status"] == s) for s in ("passed", "failed", "skipped")}
# An executable that crashed or was killed fails the check even if its last test was not recorded.
executables_ok = all(rc in (0, 77) for rc in status.values())
bench_ok = status.get("gpu_kernels") in (0, 77)
expected = {"test_cuda_host", "test_gpu", "test_gpu_dist_np1", "test_gpu_dist_np2", "gpu_kernels"}
if device:
    expected.add("bench_precision")
ok = build_ok == "true" and counts["failed"] == 0 and executables_ok and bench_ok and set(status) == expected
gpu_ran = status.get("test_gpu") == 0 and status.get("test_gpu_dist_np1") == 0
# Nothing failed but nothing ran on a GPU either: skipped, never a pass.
# With a GPU the benchmarks must have run too.
ok = ok and (not gpu_ran or status.get("gpu_kernels") == 0)
# The FP8 GEMM rows of bench precision (issue 16): TFLOP/s against bf16 and the published dense FP8
# peak. On a Hopper GPU they must have run, since the GEMM is the point of fp8 there.
fp8_rows = [r for r in (precision or {}).get("rows", []) if r["name"] in ("fp8 gemm", "linear fwd+bwd")]
for r in fp8_rows:
    if not r["available"]:
        print(f"fp8: {r['name']} {r['dtype']} {r['shape']}: not run: {r['note']}")
    elif r["name"] == "fp8 gemm":
        peak = f", {100 * r['fraction']:.1f}% of {r['reference_name']}" if r["fraction"] else ""
        print(f"fp8: gemm {r['shape']}: {r['rate'] / 1e3:.1f} TFLOP/s{peak}; {r['note']}")
    else:
        print(f"fp8: linear fwd+bwd {r['dtype']} {r['shape']}: {r['rate'] / 1e3:.1f} TFLOP/s, "
              f"{100 * r['fraction']:.0f}% of the f32 row; {r['note']}")
if device and any(g in device for g in ("H100", "H200")) and precision is not None:
    fp8_ok = any(r["name"] == "fp8 gemm" for r in fp8_rows) and all(r["available"] for r in fp8_rows)
    if not fp8_ok:
        print("fp8: the FP8 GEMM rows did not all run on this Hopper GPU")
    ok = ok and fp8_ok
verdict = "fail" if not ok else "pass" if gpu_ran else "skipped"
report = {
    "started": started,
    "device": device or None,
    "build": {"ok": build_ok == "true", "seconds": int(build_seconds)},
    "exit_status": status,
    "summary": counts,
    "gpu_tests_ran": gpu_ran,
    "ok": ok and gpu_ran,
    "verdict": verdict,
    "tests": tests,
    "benchmarks": bench,
    "precision": precision,
}
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(report, f, indent=2)
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
for t in tests:
    if t["status"] == "failed":
        print(f"  FAILED: {t['executable']}: {t['name']}")
if not gpu_ran:
    print("no GPU test ran on a GPU: this is not a GPU proof")
print("verdict:", verdict.upper())
sys.exit({"pass": 0, "fail": 1, "skipped": 77}[verdict])
EOF
verdict=$?
echo "finished in ${SECONDS}s; wrote $log and $out/gpu_check.json"
exec >&- 2>&-
wait "$tee_pid"  # let tee finish the log before the caller reads it
exit $verdict
