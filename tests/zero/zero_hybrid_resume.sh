#!/bin/sh
# A HYBRID_SHARD (2 x 2) checkpoint saved on 4 ranks, written by replica 0's shard group:
# `accel merge-weights` of it equals the saved weights, and it resumes on 4 ranks under HYBRID_SHARD
# (bitwise), on 2 under DDP and under stage 3, and on 1 (within 1e-5; zero_resume.cpp says what is checked).
# Usage: zero_hybrid_resume.sh PROGRAM ACCEL MPIRUN [MPIRUN_ARGS...]
set -u
program=$1
accel=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 100 "$@" -np 4 "$program" save hybrid "$dir" || { echo "FAILED: the save on 4 ranks exited with $?"; exit 1; }
parts=$(ls "$dir/ckpt" | grep -c '^model\.shard-.*-of-00002\.safetensors$')
[ "$parts" = 2 ] || { echo "FAILED: expected the shard group's 2 model shard files, found $parts: $(ls "$dir/ckpt")"; exit 1; }
timeout 60 "$accel" merge-weights "$dir/ckpt" "$dir/merged" || { echo "FAILED: accel merge-weights exited with $?"; exit 1; }
timeout 60 "$program" merged "$dir" || exit 1
for run in "4 hybrid" "2 0" "2 3" "1 0"; do
  np=${run% *}
  mode=${run#* }
  timeout 100 "$@" -np "$np" "$program" load "$mode" "$dir" ||
    { echo "FAILED: the load on $np rank(s) under $mode exited with $?"; exit 1; }
done
