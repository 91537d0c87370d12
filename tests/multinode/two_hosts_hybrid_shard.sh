#!/bin/bash
# HYBRID_SHARD across two "hosts" (network namespaces joined by a veth pair, netns_hosts.sh), 2 ranks
# on each, with no hybrid_shard_size given, so that the shard groups come from the nodes Open MPI reports:
# 1. test_zero's multinode case: the mesh is dp_replicate=2 x dp_shard=2 with one shard group per host,
#    and 20 steps train as DDP does (1e-6 relative), with and without accumulation;
# 2. examples/mlp_classifier under `accel launch --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD` and
#    under FULL_SHARD: both reach DDP's accuracy (>= 97 %), and HYBRID_SHARD sends fewer bytes between
#    the hosts, because only its replicas' all-reduces cross them (FULL_SHARD's gathers cross too).
# Usage: two_hosts_hybrid_shard.sh ACCEL TEST_ZERO MLP_CLASSIFIER
# Needs root (ip netns); exits 77 (skipped) where namespaces cannot be made or tools are missing.
set -u
accel=$1
test_zero=$2
mlp_classifier=$3

here=$(dirname "$0")
# shellcheck source=netns_hosts.sh
. "$here/netns_hosts.sh"
printf '%s slots=2\n%s slots=2\n' "$ip0" "$ip1" >"$work/hostfile"

# Runs `accel launch -n 4` on both hosts with FLAGS, PROGRAM and its arguments; the output is in
# $work/out, without doctest's colours, and the bytes the veth carried each way in $crossed.
launch() {
  local flags=$1
  shift
  local tx_before rx_before status
  tx_before=$(counter tx_bytes)
  rx_before=$(counter rx_bytes)
  # shellcheck disable=SC2086
  timeout 240 "${in0[@]}" "$accel" launch -n 4 --num_machines 2 --hostfile "$work/hostfile" \
    --mpirun_args "$mpirun_args" $flags "$@" >"$work/raw" 2>&1
  status=$?
  sed 's/\x1b\[[0-9;]*m//g' "$work/raw" >"$work/out"
  [ "$status" = 0 ] || { cat "$work/out"; fail "accel launch $flags $(basename "$1") exited with status $status"; }
  crossed=$(($(counter tx_bytes) - tx_before + $(counter rx_bytes) - rx_before))
}

# 1. The equivalence with DDP, on the mesh the nodes give.
launch "" "$test_zero" --test-case='multinode:*'
grep -E "^ *Data for node|^accel:|test cases|passed on all" "$work/out"
grep -Eq "Data for node: $ip1[[:space:]].*Num procs: 2" "$work/out" || fail "mpirun did not place 2 ranks on $ip1"
grep -Eq "test cases: *1 \| *1 passed \| *0 failed" "$work/out" || fail "the multinode case did not pass on every rank"
grep -q "passed on all 4 ranks" "$work/out" || fail "the multinode case did not pass on all 4 ranks"

# 2. A user's run of each strategy: the accuracy, the settings line and the bytes between the hosts.
declare -A bytes
for strategy in HYBRID_SHARD FULL_SHARD; do
  launch "--use_fsdp --fsdp_sharding_strategy $strategy" "$mlp_classifier" --hidden 256
  grep -E "^accel:|^final:" "$work/out"
  case $strategy in
    HYBRID_SHARD) expected="strategy hybrid_shard (dp_replicate=2 x dp_shard=2),.*hybrid_shard_size=node (default)" ;;
    FULL_SHARD) expected="strategy zero_3," ;;
  esac
  grep "^accel: 4 process(es)" "$work/out" | grep -q "$expected" || fail "$strategy: the settings line lacks '$expected'"
  accuracy=$(sed -n 's/^final: accuracy=\([0-9.]*\).*/\1/p' "$work/out")
  [ -n "$accuracy" ] || fail "$strategy: no final accuracy printed"
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.97) }' || fail "$strategy: accuracy $accuracy is below 0.97"
  bytes[$strategy]=$crossed
  echo "$strategy: accuracy $accuracy, $crossed bytes between the hosts"
done
# What must cross: mlp_classifier --hidden 256 is 2-256-256-3, Ψ parameters, trained for 60 epochs of
# 1200 samples in global batches of 4 x 32, 10 steps each. Under HYBRID_SHARD 2 x 2 each rank all-reduces
# its Ψ/2 shard grad with its one replica on the other host once per step (the exchange of 2 ranks), so
# 4 ranks x Ψ/2 floats cross per step: 8Ψ bytes. Anything near stage 3's traffic on top would mean a
# shard group spanning the hosts.
params=$((2 * 256 + 256 + 256 * 256 + 256 + 256 * 3 + 3))
steps=$((60 * 10))
theory=$((8 * params * steps))
awk -v h="${bytes[HYBRID_SHARD]}" -v t="$theory" -v p="$params" -v s="$steps" \
  'BEGIN { printf "HYBRID_SHARD: %.3f x the replicas'"'"' all-reduces (8 x %d parameters x %d steps = %d bytes)\n", h / t, p, s, t
           exit !(h >= t && h <= 1.1 * t) }' ||
  fail "HYBRID_SHARD sent ${bytes[HYBRID_SHARD]} bytes between the hosts; expected from $theory (the replicas' all-reduces) to 10 % more"
awk -v h="${bytes[HYBRID_SHARD]}" -v f="${bytes[FULL_SHARD]}" \
  'BEGIN { printf "HYBRID_SHARD sent %.2f of FULL_SHARD'"'"'s bytes between the hosts\n", h / f; exit !(h < f) }' ||
  fail "HYBRID_SHARD sent ${bytes[HYBRID_SHARD]} bytes between the hosts, not fewer than FULL_SHARD's ${bytes[FULL_SHARD]}"
echo "two hosts (HYBRID_SHARD): one shard group per host, equal to DDP, fewer bytes between the hosts than FULL_SHARD"
