#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Multi-host on one box: two network namespaces ("hosts") joined by a veth
# pair, 10.77.0.1/24 and 10.77.0.2/24 assigned only inside them, two ranks
# in each, tcp;ofi_rxm pinned to the veth with FI_TCP_IFACE, rendezvous
# through the root address 10.77.0.1:<port>.  Ring all-gather and
# all-reduce of 1 B .. 8 MiB verified byte for byte (net_ring --rank), then
# a rank SIGKILLed mid-collective: the survivors must fail within the
# engine timeout.  Namespaces and processes are removed on exit.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"

tap_require_root
tap_require_cmd ip
bin=$(cd "$(dirname "$0")" && pwd)/net_ring
[[ -x $bin ]] || tap_skip_all "net_ring not built next to this script"

ns_a=npx-mh-a-$$
ns_b=npx-mh-b-$$
veth_a=npxa$$
veth_b=npxb$$
pids=()
tmp=$(mktemp -d)

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! err=$(ip netns add "$ns_a" 2>&1 && ip netns add "$ns_b" 2>&1); then
	tap_skip_all "cannot create network namespaces: $err"
fi
setup() {
	ip link add "$veth_a" type veth peer name "$veth_b" &&
	ip link set "$veth_a" netns "$ns_a" &&
	ip link set "$veth_b" netns "$ns_b" &&
	ip -n "$ns_a" addr add 10.77.0.1/24 dev "$veth_a" &&
	ip -n "$ns_b" addr add 10.77.0.2/24 dev "$veth_b" &&
	ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
	ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up
}
if ! err=$(setup 2>&1); then
	tap_skip_all "cannot set up the veth pair between namespaces: $err"
fi

tap_plan 4

# start_rank NS IFACE RANK PORT TIMEOUT_MS SIZES: one rank in the background.
start_rank() {
	ip netns exec "$1" env FI_PROVIDER="tcp;ofi_rxm" FI_TCP_IFACE="$2" \
		NPROXY_ROOT_COMM_ID="10.77.0.1:$4" \
		"$bin" --rank "$3" --ranks 4 --timeout-ms "$5" --sizes "$6" \
		>"$tmp/rank$3.out" 2>&1 &
	pids[$3]=$!
}

# wait_all DEADLINE_S: wait for every rank, SIGKILL what outlives the deadline.
wait_all() {
	local end=$((SECONDS + $1)) r
	for r in 0 1 2 3; do
		while kill -0 "${pids[$r]}" 2>/dev/null && ((SECONDS < end)); do
			sleep 0.1
		done
		if kill -0 "${pids[$r]}" 2>/dev/null; then
			echo "rank $r still running after $1 s: killed" >>"$tmp/rank$r.out"
			kill -9 "${pids[$r]}" 2>/dev/null
		fi
		wait "${pids[$r]}" 2>/dev/null
		rc[$r]=$?
	done
}

# 1. A full run across the two hosts.
port=$((20000 + $$ % 20000))
sizes=1,4096,65537,1048576,8388608
start_rank "$ns_a" "$veth_a" 0 $port 15000 $sizes
start_rank "$ns_a" "$veth_a" 1 $port 15000 $sizes
start_rank "$ns_b" "$veth_b" 2 $port 15000 $sizes
start_rank "$ns_b" "$veth_b" 3 $port 15000 $sizes
wait_all 150
if ((rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && rc[3] == 0)); then
	tap_ok "4 ranks on 2 namespaces: ring all-gather + all-reduce, 1 B .. 8 MiB, tcp;ofi_rxm over veth"
else
	tap_fail "4 ranks on 2 namespaces: ring all-gather + all-reduce" \
		"exit codes ${rc[*]}" "$(tail -n 5 "$tmp"/rank*.out)"
fi
if grep -q "10.77.0" /proc/net/tcp 2>/dev/null; then
	tap_fail "no traffic from the root namespace" "10.77.0.x sockets seen in the root namespace"
else
	tap_ok "no 10.77.0.x sockets in the root namespace"
fi

# 2. Rank 3 SIGKILLed mid-collective: survivors fail with an error in time.
port=$((port + 1))
sizes=$(printf '8388608,%.0s' {1..16})
sizes=${sizes%,}
start_rank "$ns_a" "$veth_a" 0 $port 5000 "$sizes"
start_rank "$ns_a" "$veth_a" 1 $port 5000 "$sizes"
start_rank "$ns_b" "$veth_b" 2 $port 5000 "$sizes"
start_rank "$ns_b" "$veth_b" 3 $port 5000 "$sizes"
# Kill rank 3 once the collectives run: after its first size is done.
for ((i = 0; i < 600; i++)); do
	grep -q "size .* ok" "$tmp/rank3.out" 2>/dev/null && break
	sleep 0.1
done
kill -9 "${pids[3]}"
killed_at=$SECONDS
wait_all 60
elapsed=$((SECONDS - killed_at))
if ((rc[3] == 137 && rc[0] != 0 && rc[1] != 0 && rc[2] != 0)) &&
   grep -q "made no progress\|failed:" "$tmp/rank0.out" "$tmp/rank1.out" "$tmp/rank2.out" &&
   ! grep -q "nproxy_net_open" "$tmp/rank0.out" "$tmp/rank1.out" "$tmp/rank2.out"; then
	tap_ok "killed rank: survivors end with an error (exit ${rc[*]})"
else
	tap_fail "killed rank: survivors end with an error" "exit codes ${rc[*]}" \
		"$(head -n 6 "$tmp"/rank*.out)"
fi
# Each survivor fails within a few engine timeouts (5 s): the chain of
# starved neighbours, never a hang.
if ((elapsed <= 30)); then
	tap_ok "survivors done ${elapsed}s after the kill"
else
	tap_fail "survivors done within 30 s of the kill" "took ${elapsed}s"
fi
tap_done
