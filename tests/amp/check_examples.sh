#!/bin/sh
# The examples trained in fp16 and bf16 against f32 with the same options: mlp_classifier's held-out
# accuracy within 1 point, char_gpt's held-out loss within 2 %; the policy line printed once; and
# `accel launch --mixed_precision bf16 -n 2 mlp_classifier` end to end. Then fp8 (emulated on the CPU)
# against bf16: accuracy within 1 point, held-out loss within 3 %, and its recipe on the start-up lines. char_gpt trains for 600 steps: at
# 300 its loss can still be leaving a plateau, where a rounding difference moves the step it leaves
# at and the comparison measures that instead of the precision (the text is accel's own sources).
# Usage: check_examples.sh ACCEL_CLI EXAMPLES_DIR
set -eu
accel=$1
examples=$2
export ACCEL_CONFIG_FILE=/nonexistent/accel-tests.yaml

. "$(dirname "$0")/final_line.sh"
count() { printf '%s\n' "$2" | grep -c "$1" || true; }

mlp_opts=""
gpt_opts="--steps 600 --sample-length 20 --layers 2 --embd 64 --heads 4 --block-size 32"

f32=$(ACCEL_MIXED_PRECISION=no "$examples/mlp_classifier" $mlp_opts) || fail "mlp_classifier f32: $f32"
acc32=$(final "$f32" accuracy)
gpt32=$(ACCEL_MIXED_PRECISION=no "$examples/char_gpt" $gpt_opts) || fail "char_gpt f32: $gpt32"
loss32=$(final "$gpt32" held_out_loss)
echo "f32: mlp_classifier accuracy $acc32, char_gpt held_out_loss $loss32 (train $(final "$gpt32" train_loss))"

for mode in fp16 bf16; do
  half=$(ACCEL_MIXED_PRECISION=$mode "$examples/mlp_classifier" $mlp_opts 2>&1) || fail "mlp_classifier $mode: $half"
  dtype=$( [ $mode = fp16 ] && echo f16 || echo bf16)
  [ "$(count "^accel: precision policy: param f32, compute $dtype, reduction f32, grad_comm f32" "$half")" = 1 ] ||
    fail "mlp_classifier $mode did not print its policy line once: $half"
  acc=$(final "$half" accuracy)
  gpt=$(ACCEL_MIXED_PRECISION=$mode "$examples/char_gpt" $gpt_opts) || fail "char_gpt $mode: $gpt"
  loss=$(final "$gpt" held_out_loss)
  echo "$mode: mlp_classifier accuracy $acc, char_gpt held_out_loss $loss (train $(final "$gpt" train_loss))"
  if [ $mode = bf16 ]; then acc_bf16=$acc; loss_bf16=$loss; fi
  echo "$acc $acc32" | awk -v m=$mode '{ d = $1 - $2; if (d < 0) d = -d;
    if (d > 0.01) { printf "FAILED: %s accuracy %s is more than 1 point from f32 %s\n", m, $1, $2; exit 1 } }'
  echo "$loss $loss32" | awk -v m=$mode '{ d = $1 - $2; if (d < 0) d = -d;
    if (d > 0.02 * $2) { printf "FAILED: %s held-out loss %s is more than 2%% from f32 %s\n", m, $1, $2; exit 1 } }'
done

# fp8: the middle Linears in FP8 (delayed scaling, HYBRID), the first and last in bf16, against bf16.
recipe='HYBRID, margin 0, amax max over 1024 steps, first/last Linear in bf16'
fp8=$(ACCEL_MIXED_PRECISION=fp8 "$examples/mlp_classifier" $mlp_opts 2>&1) || fail "mlp_classifier fp8: $fp8"
[ "$(count "^accel: precision policy: param f32, compute bf16, reduction f32, grad_comm f32, no loss scaler, fp8 Linears: $recipe\$" "$fp8")" = 1 ] ||
  fail "mlp_classifier fp8 did not print its policy line once: $fp8"
[ "$(count "mixed_precision=fp8 (environment ACCEL_MIXED_PRECISION).*, fp8_recipe=$recipe (default)" "$fp8")" = 1 ] ||
  fail "mlp_classifier fp8 did not print its recipe on the settings line once: $fp8"
acc8=$(final "$fp8" accuracy)
gpt8=$(ACCEL_MIXED_PRECISION=fp8 "$examples/char_gpt" $gpt_opts) || fail "char_gpt fp8: $gpt8"
loss8=$(final "$gpt8" held_out_loss)
echo "fp8: mlp_classifier accuracy $acc8, char_gpt held_out_loss $loss8 (train $(final "$gpt8" train_loss))"
echo "$acc8 $acc_bf16" | awk '{ d = $1 - $2; if (d < 0) d = -d;
  if (d > 0.01) { printf "FAILED: fp8 accuracy %s is more than 1 point from bf16 %s\n", $1, $2; exit 1 } }'
echo "$loss8 $loss_bf16" | awk '{ d = $1 - $2; if (d < 0) d = -d;
  if (d > 0.03 * $2) { printf "FAILED: fp8 held-out loss %s is more than 3%% from bf16 %s\n", $1, $2; exit 1 } }'
launched8=$("$accel" launch --mixed_precision fp8 --fp8_amax_history_len 16 -n 2 "$examples/mlp_classifier" $mlp_opts 2>&1) ||
  fail "accel launch fp8: $launched8"
[ "$(count "fp8 Linears: HYBRID, margin 0, amax max over 16 steps, first/last Linear in bf16\$" "$launched8")" = 1 ] ||
  fail "accel launch --mixed_precision fp8 did not print its recipe once: $launched8"
acc8_2=$(final "$launched8" accuracy)
echo "accel launch --mixed_precision fp8 -n 2: accuracy $acc8_2"
echo "$acc8_2" | awk '{ if (!($1 >= 0.9)) { printf "FAILED: 2-rank fp8 accuracy %s below 0.9\n", $1; exit 1 } }'

# accel launch end to end: 2 ranks in bf16, one policy line, the final accuracy near f32's.
launched=$("$accel" launch --mixed_precision bf16 -n 2 "$examples/mlp_classifier" $mlp_opts 2>&1) ||
  fail "accel launch: $launched"
[ "$(count '^accel: precision policy: param f32, compute bf16, reduction f32, grad_comm f32, no loss scaler' "$launched")" = 1 ] ||
  fail "accel launch did not print the bf16 policy line once: $launched"
[ "$(count '^accel: 2 process' "$launched")" = 1 ] || fail "accel launch did not run 2 processes: $launched"
acc2=$(final "$launched" accuracy)
[ -n "$acc2" ] || fail "no final line from accel launch: $launched"
echo "accel launch --mixed_precision bf16 -n 2: accuracy $acc2"
echo "$acc2" | awk '{ if ($1 < 0.9) { printf "FAILED: 2-rank bf16 accuracy %s below 0.9\n", $1; exit 1 } }'

# Contradictory settings fail with a message that names both.
if bad=$(ACCEL_MIXED_PRECISION=bf16 ACCEL_GRAD_COMM_DTYPE=f16 "$examples/mlp_classifier" --epochs 1 2>&1); then
  fail "bf16 with grad_comm_dtype f16 ran: $bad"
fi
printf '%s\n' "$bad" | grep -q "mixed_precision=bf16 (from environment ACCEL_MIXED_PRECISION) and grad_comm_dtype=f16 (from environment ACCEL_GRAD_COMM_DTYPE) conflict" ||
  fail "unclear message for contradictory settings: $bad"
echo "mixed precision examples: all checks passed"
