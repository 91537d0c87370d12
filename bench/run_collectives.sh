#!/usr/bin/env bash
# Runs `accel bench allreduce` through `accel launch` with 2 and 4 ranks, several times, keeps each
# run's JSON, and prints the per-size median busbw of every column with the ratios to raw MPI
# (bench/plot_bench.py table). The numbers in docs/benchmarks.md come from it.
# Usage: bench/run_collectives.sh [BUILD_DIR] [OUT_DIR] [REPEATS] [extra accel bench arguments...]
set -euo pipefail
build=${1:-build}
out=${2:-bench-out}
repeats=${3:-3}
shift $(($# < 3 ? $# : 3))
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
accel=$(cd "$build" && pwd)/accel
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus"
for r in $(seq 1 "$repeats"); do
  for np in 2 4; do
    echo "run $r, $np ranks, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    OMP_NUM_THREADS=1 "$accel" launch -n "$np" "$accel" bench allreduce -b 1M -e 64M "$@" \
      --json "$out/allreduce_np${np}_$r.json" > "$out/allreduce_np${np}_$r.txt"
  done
done
python3 "$here/plot_bench.py" table "$out"/allreduce_np*_*.json
