#!/bin/bash
# Preemption: a SIGTERM to `accel launch -n 2` during char_gpt, and then one to a single rank. Each
# time both ranks save the same step, the job exits with status 75 within 10 s of the signal, and
# --resume_from_checkpoint latest continues from that step. Then the same under an mpirun that
# never passes the signal on: `accel launch` reaches the ranks of its machine itself.
# Usage: preemption.sh ACCEL CHAR_GPT
# Under sh (dash) the signal went out, about once in 20 runs, only when the job had run to its end,
# 90 s late, for a cause not found; so bash, and a failure says how long after the step line the
# signal went.
set -u
accel=$1
char_gpt=$2
dir=$(mktemp -d)
trap 'kill -9 $job 2>/dev/null; rm -rf "$dir"' EXIT
job=
fail() {
  {
    echo "FAILED: $*"
    [ -f "$dir/log" ] && sed 's/^/  | /' "$dir/log"
  } >&2
  # Called in stop's subshell too, whose exit the trap does not see: the job ends here.
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  pkill -9 -f "mpirun.*$char_gpt"
  pkill -9 -f "^$char_gpt"
  exit 1
}
# A small model, so that steps are short and many fit before the signal.
small="--layers 1 --embd 32 --heads 2 --block-size 32 --batch-size 8 --sample-length 10 --output_dir $dir/run"
wait_for_line() {  # PATTERN SECONDS
  local t=0
  while ! grep -q "$1" "$dir/log"; do
    sleep 0.2
    t=$((t + 1))
    [ "$t" -le $(($2 * 5)) ] || fail "no line '$1' after $2 s"
  done
}
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }  # seconds since $1
# Waits for the job to end, failing with MESSAGE after SECONDS; returns the job's status.
job_status_within() {  # SECONDS MESSAGE
  local t=0
  while kill -0 "$job" 2>/dev/null; do
    sleep 0.2
    t=$((t + 1))
    [ "$t" -le $(($1 * 5)) ] || fail "$2"
  done
  wait "$job"
}

# stop TARGET: starts a long run (resumed if a checkpoint exists), signals TARGET a second after the
# first step line, and checks the stop. Prints the step saved.
stop() {
  resume=
  [ -d "$dir/run/checkpoints" ] && resume="--resume_from_checkpoint latest"
  : >"$dir/log"
  # shellcheck disable=SC2086
  "$accel" launch -n 2 "$char_gpt" $small --steps 100000 $resume >"$dir/log" 2>&1 &
  job=$!
  if [ -n "$resume" ]; then wait_for_line "^resumed from" 60; fi
  wait_for_line "^step .* loss" 60
  local seen target
  seen=$EPOCHREALTIME
  sleep 1
  case "$1" in
    launch) target=$job ;;
    rank) target=$(pgrep -f "^$char_gpt" | tail -n 1) ;;
  esac
  kill -TERM "$target" || fail "no SIGTERM reached the $1 (pid '$target')"
  local signalled late
  signalled=$EPOCHREALTIME
  late="the SIGTERM went to the $1 (pid $target) $(since "$seen") s after the first step line"
  job_status_within 30 "the job still runs 30 s after a SIGTERM to the $1; $late"
  local status=$?
  local took
  took=$(since "$signalled")
  [ "$status" = 75 ] || fail "after a SIGTERM to the $1 the job exited with $status, not 75; $late"
  awk -v s="$took" 'BEGIN { exit !(s <= 10) }' || fail "the job took $took s to stop after a SIGTERM to the $1; $late"
  line=$(grep "preemption request" "$dir/log") || fail "no line about the preemption request"
  step=$(echo "$line" | sed -n 's/.*stops after step \([0-9]*\), saved in \(.*\)$/\1/p')
  saved=$(echo "$line" | sed -n 's/.*, saved in \(.*\)$/\1/p')
  [ -n "$step" ] && [ -f "$saved/COMPLETE" ] || fail "no complete checkpoint named in: $line"
  grep -q "\"completed_steps\": $step," "$saved/accelerator_state.json" ||
    fail "$saved does not hold step $step: $(grep completed_steps "$saved/accelerator_state.json")"
  # Both ranks wrote their part of that one checkpoint.
  for r in 0 1; do [ -f "$saved/random_states_$r.safetensors" ] || fail "rank $r wrote no random streams in $saved"; done
  echo "SIGTERM to the $1: both ranks saved step $step in $saved, exited with 75 after $took s" >&2
  echo "$step $saved"
}

result=$(stop launch) || exit 1
set -- $result
first_step=$1
first_dir=$2
result=$(stop rank) || exit 1
set -- $result
second_step=$1
grep -q "^resumed from $first_dir at step $first_step\$" "$dir/log" ||
  fail "the second run did not say it resumed from $first_dir at step $first_step"
[ "$second_step" -gt "$first_step" ] || fail "the resumed run saved step $second_step, not beyond $first_step"

# A run to a fixed end resumes from the second checkpoint and finishes normally.
# shellcheck disable=SC2086
"$accel" launch -n 2 "$char_gpt" $small --steps $((second_step + 5)) --resume_from_checkpoint latest \
  >"$dir/log" 2>&1 || fail "the last resume failed"
grep -q "^resumed from .* at step $second_step\$" "$dir/log" || fail "the last run did not resume at step $second_step"
grep -q "^final:" "$dir/log" || fail "the last run did not finish"
echo "resumed at step $second_step and finished"

# Under an mpirun that never passes SIGUSR2 on, the SIGTERM to accel launch still reaches the rank
# (from accel launch itself), which saves and stops at once.
: >"$dir/log"
# shellcheck disable=SC2086
PATH="$(cd "$(dirname "$0")" && pwd)/mpirun_without_forwarding:$PATH" \
  "$accel" launch -n 1 "$char_gpt" $small --steps 100000 >"$dir/log" 2>&1 &
job=$!
wait_for_line "^step .* loss" 60
kill -TERM "$job"
signalled=$EPOCHREALTIME
job_status_within 10 "10 s after a SIGTERM to accel launch under an mpirun that passes nothing on, the job still runs"
status=$?
[ "$status" = 75 ] || fail "under an mpirun that passes nothing on, the job exited with $status, not 75"
grep -q "preemption request (SIGTERM) reached rank 0" "$dir/log" || fail "no line about the preemption request"
echo "under an mpirun that passes nothing on: saved and exited with 75 after $(since "$signalled") s"
