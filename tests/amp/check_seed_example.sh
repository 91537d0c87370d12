#!/bin/sh
# The seed's linear-regression example with its five changed lines and no autocast scope: in bf16 and
# fp16 every model output is a value of the compute dtype (the matmul ran in it), in f32 few are; and
# it converges to weight 3 on 1 rank and under `accel launch -n 2`.
# Usage: check_seed_example.sh ACCEL_CLI PROGRAM
set -eu
accel=$1
program=$2
export ACCEL_CONFIG_FILE=/nonexistent/accel-tests.yaml

. "$(dirname "$0")/final_line.sh"

check_run() {  # label, output, expected compute dtype, whether all outputs must be in it
  weight=$(final "$2" weight)
  exact=$(final "$2" outputs_in_compute_dtype)
  [ -n "$weight" ] || fail "$1: no final line: $2"
  [ "$(final "$2" compute)" = "$3" ] || fail "$1: compute dtype $(final "$2" compute), expected $3"
  echo "$1: weight $weight, loss $(final "$2" loss), outputs in $3: $exact"
  echo "$weight" | awk -v l="$1" '{ d = $1 - 3; if (d < 0) d = -d;
    if (d > 0.1) { printf "FAILED: %s did not converge: weight %s, expected 3 +- 0.1\n", l, $1; exit 1 } }'
  echo "$exact" | awk -F/ -v l="$1" -v all="$4" '{
    if (all == "yes" && $1 != $2) { printf "FAILED: %s: only %s outputs are %s values\n", l, $0, "reduced-precision"; exit 1 }
    if (all == "no" && $1 * 2 > $2) { printf "FAILED: %s: %s f32 outputs look rounded to bf16\n", l, $0; exit 1 } }'
}

out=$(ACCEL_MIXED_PRECISION=no "$program") || fail "f32: $out"
check_run "f32, 1 rank" "$out" f32 no
for mode in bf16 fp16; do
  dtype=$( [ $mode = fp16 ] && echo f16 || echo bf16)
  out=$(ACCEL_MIXED_PRECISION=$mode "$program") || fail "$mode: $out"
  check_run "$mode, 1 rank" "$out" $dtype yes
  out=$("$accel" launch --mixed_precision $mode -n 2 "$program" 2>&1) || fail "$mode, 2 ranks: $out"
  check_run "$mode, 2 ranks" "$out" $dtype yes
done
