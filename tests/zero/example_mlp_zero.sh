#!/bin/sh
# The issue's acceptance check: examples/mlp_classifier started as a user would, on 2 ranks under
# `accel launch --use_deepspeed --zero_stage N` and `--use_fsdp` (and on 4 under HYBRID_SHARD 2 x 2),
# reaches the accuracy of plain DDP (>= 97 %), and its settings line names the effective strategy.
# Usage: example_mlp_zero.sh ACCEL EXAMPLE
set -eu
accel=$1
example=$2

fail() {
  echo "FAILED: $*"
  exit 1
}

run() {  # FLAGS STRATEGY [RANKS, default 2]
  np=${3:-2}
  out=$("$accel" launch -n "$np" $1 "$example" 2>&1) || fail "accel launch -n $np $1 exited with $?"
  printf '$ accel launch -n %s %s mlp_classifier\n%s\n' "$np" "$1" "$(printf '%s\n' "$out" | grep -E '^accel:|^final:')"
  printf '%s\n' "$out" | grep "^accel: $np process(es), device [a-z0-9:]*, " | grep -qF "strategy $2," ||
    fail "$1: the settings line does not name strategy $2"
  accuracy=$(printf '%s\n' "$out" | sed -n 's/^final: accuracy=\([0-9.]*\).*/\1/p')
  [ -n "$accuracy" ] || fail "$1: no final accuracy printed"
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.97) }' || fail "$1: accuracy $accuracy is below 0.97"
  echo "$1: accuracy $accuracy"
}

run "" data_parallel
for stage in 1 2 3; do run "--use_deepspeed --zero_stage $stage" "zero_$stage"; done
run "--use_fsdp" zero_3
run "--use_fsdp --fsdp_sharding_strategy SHARD_GRAD_OP" zero_2
run "--use_fsdp --fsdp_sharding_strategy HYBRID_SHARD --fsdp_hybrid_shard_size 2" \
  "hybrid_shard (dp_replicate=2 x dp_shard=2)" 4
echo PASS
