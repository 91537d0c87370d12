#!/usr/bin/env bash
# Runs bench/train_step (accel) and bench/train_step_pytorch.py back to back with the same thread
# count, several times, and prints each run's median step time, the median over runs and the ratio.
# Usage: bench/run_train_step.sh [BUILD_DIR] [THREADS] [REPEATS] [STEPS]
# PYTHON names an interpreter that has torch (default python3).
set -euo pipefail
build=${1:-build}
threads=${2:-2}
repeats=${3:-5}
steps=${4:-50}
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

export OMP_NUM_THREADS=$threads
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus; threads $threads; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$repeats"); do
  "$build/bench/train_step" --steps "$steps" --threads "$threads" --json "$out/accel_$r.json" > "$out/accel_$r.txt"
  "$python" "$here/train_step_pytorch.py" --steps "$steps" --threads "$threads" --json "$out/torch_$r.json" \
    > "$out/torch_$r.txt"
done
"$python" - "$out" "$repeats" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, repeats + 1):
    a = json.load(open(f"{out}/accel_{r}.json"))
    t = json.load(open(f"{out}/torch_{r}.json"))
    rows.append((a, t))
    print(f"run {r}: accel {a['median_step_ms']:8.2f} ms   pytorch {t['median_step_ms']:8.2f} ms   "
          f"accel/pytorch {a['median_step_ms'] / t['median_step_ms']:.3f}")
am = statistics.median(a["median_step_ms"] for a, _ in rows)
tm = statistics.median(t["median_step_ms"] for _, t in rows)
gf = statistics.median(a["step_gflops"] for a, _ in rows)
frac = statistics.median(a["fraction_of_matmul"] for a, _ in rows)
print(f"median over {repeats} runs: accel {am:.2f} ms ({gf:.1f} GFLOP/s, {100 * frac:.1f} % of its plain-matmul rate), "
      f"pytorch {tm:.2f} ms ({rows[0][1]['torch']}); accel/pytorch = {am / tm:.3f}")
PY
