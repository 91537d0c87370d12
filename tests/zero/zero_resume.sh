#!/bin/sh
# A ZeRO stage's checkpoint saved on 2 ranks: `accel merge-weights` of it equals the saved weights, and
# it resumes on 1, 2 and 4 ranks as the run that never stopped (zero_resume.cpp says what is checked).
# Usage: zero_resume.sh PROGRAM ACCEL STAGE MPIRUN [MPIRUN_ARGS...]
set -u
program=$1
accel=$2
stage=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 100 "$@" -np 2 "$program" save "$stage" "$dir" || { echo "FAILED: the save on 2 ranks exited with $?"; exit 1; }
timeout 60 "$accel" merge-weights "$dir/ckpt" "$dir/merged" || { echo "FAILED: accel merge-weights exited with $?"; exit 1; }
timeout 60 "$program" merged "$dir" || exit 1
for np in 1 2 4; do
  timeout 100 "$@" -np "$np" "$program" load "$stage" "$dir" || { echo "FAILED: the load on $np rank(s) exited with $?"; exit 1; }
done
