# Sourced by the two-host tests: two "hosts" on one machine, network namespaces joined by a veth pair,
# with Open MPI reaching the second one through a plm_rsh_agent that enters its namespace instead of
# ssh. Defines skip and fail, the addresses ip0 and ip1 of the hosts, the prefixes in0 and in1 that run
# a command on each, the scratch folder work, mpirun_args (TCP over the veth only) and counter, the
# veth's byte counters as ns0 sees them. Removes it all on exit. Needs root (ip netns); skips (77) where
# namespaces cannot be made or tools are missing. In a chroot, where `ip netns exec` cannot remount /,
# it enters the namespaces with nsenter instead.

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}

[ "$EUID" = 0 ] || skip "network namespaces need root"
for tool in ip mpirun timeout; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (iproute2, openmpi-bin, coreutils)"
done

# Names unique to this run, so runs on one machine do not collide (interface names: at most 15 chars).
ns0=accel_mn0_$$
ns1=accel_mn1_$$
veth0=amn0_$$
veth1=amn1_$$
ip0=10.77.0.1
ip1=10.77.0.2
subnet=10.77.0.0/24
work=$(mktemp -d)

cleanup() {
  # Whatever still runs in a namespace (an orted or a rank after a timeout) was started by this test.
  for ns in "$ns0" "$ns1"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$veth0" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns0" 2>"$work/err" || skip "ip netns add is not permitted here: $(cat "$work/err")"
ip netns add "$ns1" || fail "ip netns add $ns1"
# `ip netns exec` also gives the command a /sys of the namespace, by making / a slave mount first; that
# fails where / is not a mount point (a chroot). A private mount namespace cannot help there (unshare -m
# cannot change the propagation of a / that is not a mount point, and without that its mounts could
# leak into the host's), so the test then enters the network namespace alone with nsenter: all it
# uses is the network, and it reads the veth counters from /proc/net/dev, which follows the netns.
enter=ip
if ! ip netns exec "$ns0" true 2>"$work/err"; then
  grep -qi mount "$work/err" || skip "ip netns exec is not permitted here: $(cat "$work/err")"
  command -v nsenter >/dev/null 2>&1 || skip "ip netns exec cannot remount / ($(cat "$work/err")) and nsenter is missing"
  nsenter --net="/run/netns/$ns0" true 2>"$work/err" || skip "neither ip netns exec nor nsenter works here: $(cat "$work/err")"
  enter=nsenter
  echo "ip netns exec cannot remount / here; entering the namespaces with nsenter --net"
fi
# The command prefix that runs a command in each namespace (timeout runs it; the agent below chooses alike).
# `ip -n NS` remounts /sys as `ip netns exec` does, so commands inside use plain `ip` behind the prefix.
if [ "$enter" = ip ]; then
  in0=(ip netns exec "$ns0")
  in1=(ip netns exec "$ns1")
else
  in0=(nsenter --net="/run/netns/$ns0")
  in1=(nsenter --net="/run/netns/$ns1")
fi
ip link add "$veth0" type veth peer name "$veth1" 2>"$work/err" || skip "no veth pairs here: $(cat "$work/err")"
ip link set "$veth0" netns "$ns0" && ip link set "$veth1" netns "$ns1" || fail "moving the veth ends"
"${in0[@]}" ip addr add "$ip0/24" dev "$veth0" && "${in1[@]}" ip addr add "$ip1/24" dev "$veth1" || fail "addresses"
"${in0[@]}" ip link set lo up && "${in1[@]}" ip link set lo up || fail "lo up"
"${in0[@]}" ip link set "$veth0" up && "${in1[@]}" ip link set "$veth1" up || fail "veth up"
if command -v ping >/dev/null 2>&1; then
  "${in0[@]}" ping -c 1 -W 5 "$ip1" >/dev/null 2>&1 || fail "$ip0 cannot reach $ip1 over the veth"
fi

# Open MPI calls the agent as `AGENT [options] HOST COMMAND...`, like ssh: the command is one shell line.
cat >"$work/netns_agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case "\$host" in
  $ip0) ns=$ns0 ;;
  $ip1) ns=$ns1 ;;
  *) echo "netns_agent: unknown host \$host" >&2; exit 255 ;;
esac
if [ "$enter" = ip ]; then exec ip netns exec "\$ns" sh -c "\$*"; fi
exec nsenter --net="/run/netns/\$ns" sh -c "\$*"
AGENT
chmod +x "$work/netns_agent"

# pml ob1 with btl tcp,self: ranks talk TCP only (no shared memory, no UCX), over the veth subnet only.
mpirun_args="--mca plm_rsh_agent $work/netns_agent --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include $subnet \
--mca oob_tcp_if_include $subnet --bind-to none --display-map -x OMP_NUM_THREADS -x ACCEL_TEST_WATCHDOG_S"

# The veth's byte counters in ns0, from /proc/net/dev: after "name:", rx_bytes is the first number and
# tx_bytes the ninth (a large counter may touch the colon, so the name is cut off first).
counter() {
  "${in0[@]}" sed -n "s/^ *$veth0: *//p" /proc/net/dev | awk -v field="$1" '{ print (field == "rx_bytes" ? $1 : $9) }'
}
