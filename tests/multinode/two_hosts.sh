#!/bin/bash
# Two "hosts" on one machine (network namespaces joined by a veth pair, netns_hosts.sh): runs the
# data-parallel equivalence test (N ranks == 1 rank, tests/ddp) on 4 ranks, 2 per host, started by
# `accel launch` either with a hostfile or with the machine flags (one `accel launch` per host), and
# checks from the veth byte counters that the gradient traffic crossed between the hosts.
# Usage: two_hosts.sh hostfile|machine_flags ACCEL TEST_DDP
# Needs root (ip netns); exits 77 (skipped) where namespaces cannot be made or tools are missing.
set -u
mode=$1
accel=$2
test_ddp=$3

here=$(dirname "$0")
# shellcheck source=netns_hosts.sh
. "$here/netns_hosts.sh"
case "$mode" in hostfile|machine_flags) ;; *) fail "unknown mode '$mode' (hostfile or machine_flags)" ;; esac
equivalence=(--test-case='N ranks train to the same weights as one process*')
tx_before=$(counter tx_bytes)
rx_before=$(counter rx_bytes)

if [ "$mode" = hostfile ]; then
  printf '%s slots=2\n%s slots=2\n' "$ip0" "$ip1" >"$work/hostfile"
  timeout 240 "${in0[@]}" "$accel" launch -n 4 --num_machines 2 --hostfile "$work/hostfile" \
    --mpirun_args "$mpirun_args" "$test_ddp" "${equivalence[@]}" >"$work/out" 2>&1
  status=$?
  cat "$work/out"
  [ "$status" = 0 ] || fail "accel launch --hostfile exited with status $status"
else
  flags=(-n 4 --num_machines 2 --main_process_ip "$ip0" --main_process_port 29500 --rendezvous_timeout 60)
  # First a dry run: machine 0 prints the line it would run, with the hostfile it gathered.
  timeout 90 "${in1[@]}" "$accel" launch "${flags[@]}" --machine_rank 1 "$test_ddp" >"$work/dry1" 2>&1 &
  dry1=$!
  ACCEL_MPIRUN_ARGS="$mpirun_args" timeout 90 "${in0[@]}" "$accel" launch "${flags[@]}" --machine_rank 0 \
    --dry-run "$test_ddp" >"$work/dry0" 2>"$work/dry0.err"
  status=$?
  wait $dry1
  status1=$?
  cat "$work/dry0" "$work/dry0.err" "$work/dry1"
  [ "$status" = 0 ] && [ "$status1" = 0 ] || fail "the dry run exited with $status (machine 0) and $status1 (machine 1)"
  hostfile=$(sed -n 's/.* --hostfile \([^ ]*\) .*/\1/p' "$work/dry0")
  [ -f "$hostfile" ] || fail "the dry run names no hostfile"
  [ "$(cat "$hostfile")" = "$(printf '%s slots=2\n%s slots=2' "$ip0" "$ip1")" ] || fail "hostfile: $(cat "$hostfile")"
  rm -f "$hostfile"
  grep -q -- "--mca btl_tcp_if_include $subnet" "$work/dry0" || fail "ACCEL_MPIRUN_ARGS is not in the mpirun line"

  # Then the job: machine 1 waits for machine 0's mpirun to start its ranks and exits with the job's status.
  timeout 240 "${in1[@]}" "$accel" launch "${flags[@]}" --machine_rank 1 "$test_ddp" \
    "${equivalence[@]}" >"$work/out1" 2>&1 &
  machine1=$!
  ACCEL_MPIRUN_ARGS="$mpirun_args" timeout 240 "${in0[@]}" "$accel" launch "${flags[@]}" --machine_rank 0 \
    "$test_ddp" "${equivalence[@]}" >"$work/out" 2>&1
  status=$?
  wait $machine1
  status1=$?
  cat "$work/out"
  echo "--- machine 1 ---"
  cat "$work/out1"
  [ "$status" = 0 ] || fail "accel launch on machine 0 exited with status $status"
  [ "$status1" = 0 ] || fail "accel launch on machine 1 exited with status $status1"
  grep -q "the job ended with status 0" "$work/out1" || fail "machine 1 did not hear the job's status"
fi

tx=$(($(counter tx_bytes) - tx_before))
rx=$(($(counter rx_bytes) - rx_before))

# mpirun gives local ranks a terminal, so doctest colours its summary: drop the escapes first.
sed 's/\x1b\[[0-9;]*m//g' "$work/out" >"$work/plain"
grep -q "data-parallel tests passed on all 4 ranks" "$work/plain" || fail "the equivalence test did not pass on 4 ranks"
grep -Eq "test cases: *1 \| *1 passed \| *0 failed" "$work/plain" || fail "not exactly the one equivalence test ran"
# mpirun's job map names the local host by its hostname and the other by its hostfile address.
grep -Eq "Data for node: $ip1[[:space:]].*Num procs: 2" "$work/plain" || fail "mpirun did not place 2 ranks on $ip1"
grep -Ev "Data for node: $ip1[[:space:]]" "$work/plain" | grep -Eq "Data for node: .*Num procs: 2" ||
  fail "mpirun did not place 2 ranks on $ip0"

# The test trains tests/ddp/support.cpp's 8-32-32-4 MLP for 100 steps, for 2 backends x 2 optimizers.
# Each step all-reduces every gradient; for 2 ranks per host, each direction of the veth carries at
# least the whole gradient once per step, whatever the all-reduce algorithm.
params=$((8 * 32 + 32 + 32 * 32 + 32 + 32 * 4 + 4))
steps=$((100 * 2 * 2))
bound=$((params * 4 * steps))
echo "veth $veth0 ($ip0): tx $tx bytes, rx $rx bytes; gradient $params floats x $steps steps = $bound bytes"
[ "$tx" -ge "$bound" ] || fail "tx $tx bytes < $bound: the gradients did not cross the veth"
[ "$rx" -ge "$bound" ] || fail "rx $rx bytes < $bound: the gradients did not cross the veth"

if [ "$mode" = machine_flags ]; then
  # A failing job: every machine's accel launch exits with the job's (non-zero) status.
  timeout 90 "${in1[@]}" "$accel" launch "${flags[@]}" --machine_rank 1 sh -c 'exit 3' >"$work/fail1" 2>&1 &
  machine1=$!
  ACCEL_MPIRUN_ARGS="$mpirun_args" timeout 90 "${in0[@]}" "$accel" launch "${flags[@]}" --machine_rank 0 \
    sh -c 'exit 3' >"$work/fail0" 2>&1
  status=$?
  wait $machine1
  status1=$?
  grep -v "Process OMPI\|Data for\|====\|^ *$" "$work/fail0" "$work/fail1"
  [ "$status" != 0 ] || fail "a failing job left accel launch on machine 0 with status 0"
  [ "$status1" = "$status" ] || fail "machine 1 exited with $status1, machine 0 with $status"
  grep -q "accel launch: rank [0-9] on .* exited with status 3" "$work/fail0" || fail "the failing rank is not named"
  grep -q "the job ended with status $status" "$work/fail1" || fail "machine 1 did not report the job's status"
  echo "a failing job: accel launch exited with status $status on both machines"
fi
echo "two hosts ($mode): 4 ranks across network namespaces train like one process; the gradients crossed the veth"
