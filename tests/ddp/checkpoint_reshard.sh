#!/bin/sh
# Saves a checkpoint on 4 ranks and loads it on 2 and on 1 (checkpoint_reshard.cpp says what is checked).
# Usage: checkpoint_reshard.sh PROGRAM MPIRUN [MPIRUN_ARGS...]
set -u
program=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 100 "$@" -np 4 "$program" save "$dir" || { echo "FAILED: the save on 4 ranks exited with $?"; exit 1; }
for np in 2 1; do
  timeout 100 "$@" -np "$np" "$program" load "$dir" || { echo "FAILED: the load on $np rank(s) exited with $?"; exit 1; }
done
