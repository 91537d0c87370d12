#!/bin/sh
# A SIGTERM or a SIGINT to `accel launch -n 2` of a program that never asks should_stop() ends the
# whole job: within 10 s no launcher, mpirun or rank is left, and the status is not 0.
# Usage: launch_signals.sh ACCEL LINEAR_REGRESSION
set -u
accel=$1
program=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() {
  echo "FAILED: $*"
  sed 's/^/  | /' "$log"
  pkill -9 -f "$program" 2>/dev/null
  exit 1
}
for signal in TERM INT; do
  "$accel" launch -n 2 "$program" --epochs 2000000000 >"$log" 2>&1 &
  job=$!
  t=0
  until grep -q "^epoch" "$log"; do
    sleep 0.2
    t=$((t + 1))
    [ "$t" -le 300 ] || fail "no epoch line after 60 s"
  done
  kill "-$signal" "$job"
  t=0
  while kill -0 "$job" 2>/dev/null || pgrep -f "mpirun.*$program" >/dev/null || pgrep -f "^$program" >/dev/null; do
    sleep 0.2
    t=$((t + 1))
    [ "$t" -le 50 ] || fail "10 s after SIG$signal to accel launch, processes are left: $(pgrep -af "$program")"
  done
  wait "$job"
  status=$?
  [ "$status" != 0 ] || fail "after SIG$signal accel launch exited with 0"
  echo "SIG$signal to accel launch: every process gone after $((t / 5)) s, status $status"
done
