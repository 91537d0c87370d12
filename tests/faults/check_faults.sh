#!/bin/sh
# Each way a job goes wrong ends every rank within 30 s, with a non-zero status and a report or
# failure line that names the rank, the collective and the source line; no process is left behind.
# Usage: check_faults.sh ACCEL_CLI FAULT_PROGRAM SOURCE_FILE [SCENARIO...]
set -u
accel=$1
program=$2
source=$3
shift 3
export ACCEL_CONFIG_FILE=/nonexistent/accel-tests.yaml OMP_NUM_THREADS=1
failures=0

line_of() { grep -n "FAULT-LINE $1\$" "$source" | cut -d: -f1; }

# run NAME NP TIMEOUT: runs the scenario, sets $out, $status and $seconds.
run() {
  start=$(date +%s.%N)
  out=$("$accel" launch -n "$2" --timeout "$3" "$program" "$1" 2>&1)
  status=$?
  seconds=$(echo "$(date +%s.%N) $start" | awk '{ printf "%.1f", $1 - $2 }')
  echo "== $1: status $status after $seconds s"
  printf '%s\n' "$out" | grep -aE "^accel|^  rank|^  ranks" | sed 's/^/   /'
}

expect() {  # a message, then an extended regular expression the output must match
  if printf '%s\n' "$out" | grep -aEq "$2"; then echo "   ok: $1"; else echo "   FAILED: $1 (no match for: $2)"; failures=$((failures + 1)); fi
}

finish() {  # the status is not 0, every rank went within 30 s, no process is left, the last line names the failure
  [ "$status" -ne 0 ] && echo "   ok: non-zero status" || { echo "   FAILED: status 0"; failures=$((failures + 1)); }
  echo "$seconds" | awk '{ exit !($1 < 30) }' && echo "   ok: every rank gone in $seconds s" ||
    { echo "   FAILED: took $seconds s"; failures=$((failures + 1)); }
  sleep 0.5
  # This build's fault_program only (another checkout's suite may run its own at the same time), and
  # running ones only: a zombie has exited and waits for its (re-)parent, which a container's first
  # process may reap a moment later.
  left=$(ps -eo stat=,pid=,args= | awk -v p="$program" '$1 !~ /^Z/ && $3 == p')
  if [ -n "$left" ]; then
    echo "   FAILED: processes left: $left"; failures=$((failures + 1))
    pkill -9 -f "^$program( |\$)"
  else
    echo "   ok: no process left"
  fi
  [ -z "${1:-}" ] || expect "the last line names the first failure" "$1"
  last=$(printf '%s\n' "$out" | tail -n 1)
  [ -z "${1:-}" ] || { printf '%s\n' "$last" | grep -aEq "$1" && echo "   ok: it is the last line" ||
    { echo "   FAILED: the last line is: $last"; failures=$((failures + 1)); }; }
}

site() { echo "fault_program.cpp:$(line_of "$1")"; }

for scenario in "$@"; do
  case $scenario in
  gather_on_main)
    run gather_on_main 2 20
    expect "rank 0 waits in the gather's exchange at its line" "rank 0 waits in all_gather #[0-9]+ \(Accelerator::gather at $(site gather_on_main)\)"
    expect "rank 1 never entered it and is exiting" "rank 1 never entered all_gather #[0-9]+; its last collective was #[0-9]+ .*, and it is exiting"
    finish "first failure: rank 0 .* ends the job: all_gather"
    ;;
  reduce_vs_broadcast)
    run reduce_vs_broadcast 2 20
    expect "the ranks' different collectives are named" "rank [01] .* failed: Accelerator: rank 0 called reduce but rank 1 called broadcast"
    expect "with the rank's source line" "failed: .*at Accelerator::(reduce|broadcast) at fault_program.cpp:[0-9]+\)"
    finish "first failure: rank [01] .* failed: Accelerator: rank 0 called reduce but rank 1 called broadcast"
    ;;
  sleep)
    run sleep 2 3
    expect "rank 0 waits in the reduce at its line" "rank 0 waits in all_gather #[0-9]+ \(Accelerator::reduce at $(site sleep)\)"
    expect "rank 1 never entered it and runs other code" "rank 1 never entered all_gather #[0-9]+; .*, and it runs other code"
    finish "first failure: rank 0 .* ends the job: .*the timeout is 3 s"
    ;;
  throw_in_backward)
    run throw_in_backward 4 20
    expect "rank 2 is named with its exception" "accel: rank 2 \(.*, pid [0-9]+\) failed: a backward hook on rank 2 gives up"
    finish "first failure: rank 2 .* failed: a backward hook on rank 2 gives up"
    ;;
  exit | return)
    run "$scenario" 2 20
    expect "rank 0 waits in the reduce at its line" "rank 0 waits in all_gather #[0-9]+ \(Accelerator::reduce at $(site exit)\)"
    expect "rank 1 is named as exiting" "rank 1 never entered all_gather #[0-9]+; .*, and it is exiting"
    finish "first failure: rank 0 .* ends the job"
    ;;
  sigkill)
    run sigkill 2 20
    expect "the launcher names the killed rank" "accel launch: rank 1 on .* exited with status 137 \(signal 9\)"
    finish
    ;;
  comm_thread)
    run comm_thread 2 20
    expect "the rank whose communication thread failed is named with the collective" "accel: rank [01] \(.*\) failed: .*all_reduce"
    finish "first failure: rank [01] .* failed: "
    ;;
  *)
    echo "unknown scenario $scenario"; failures=$((failures + 1)) ;;
  esac
done
[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
