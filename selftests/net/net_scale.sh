#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Many hosts on one box: NPROXY_SCALE_HOSTS network namespaces (default 4)
# joined by a bridge in a namespace of their own, 10.79.0.<h+1>/24 assigned
# only inside them, NPROXY_SCALE_RANKS ranks each (default 2), tcp;ofi_rxm
# (NPROXY_SCALE_PROVIDER: another, e.g. net) pinned to each host's eth0
# with FI_TCP_IFACE and FI_NET_IFACE, rendezvous at 10.79.0.1.
# `make check-scale` runs it at 8 x 8.
#
#  1. Connections are up when nproxy_net_open() returns: with the ranks held
#     after the open, before any op, every host has an established
#     connection to the next host (its ring neighbour), so the first op does
#     not spend the no-progress deadline connecting.
#  2. The ring all-gather + all-reduce, straight after the open, pass with a
#     5 s engine deadline (no false dead peer while connecting).
#  3. A partition (host 1's eth0 down mid-collective): the rank whose ring
#     predecessor is on host 1 ends at its 5 s deadline naming that host's
#     address, and no rank is left running.
#  4. nproxy-run, one process per rank from NPROXY_RANK/NPROXY_LOCAL_RANK:
#     a rank on host 1 killed mid-run (NPROXY_RUN_KILL) ends every other
#     rank on every host within NPROXY_SCALE_KILL_BOUND_S (default 10 s)
#     of its death, with the engine's deadline left at its 30 s default (so
#     the abort ends them, not a deadline), each rank's output naming the
#     dead rank, its pid and its host's address.
#
# Namespaces and processes are removed on exit.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"

tap_require_root
tap_require_cmd ip
tap_require_cmd ss
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/net_ring
run=$(cd "$here/../.." && pwd)/bin/nproxy-run
[[ -x $bin ]] || tap_skip_all "net_ring not built next to this script"
[[ ${SAN:-} == tsan ]] && tap_skip_all "under TSan (make tsan): its 5 s engine deadlines are too short for TSan's slowdown; the plain and ASan runs cover it"

hosts=${NPROXY_SCALE_HOSTS:-4}
per=${NPROXY_SCALE_RANKS:-2}
provider=${NPROXY_SCALE_PROVIDER:-tcp;ofi_rxm}
n=$((hosts * per))
sw=npx-sc-sw-$$
pids=()
tmp=$(mktemp -d)

cleanup() {
	local p h
	for p in "${pids[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	for ((h = 0; h < hosts; h++)); do
		ip netns del "npx-sc-$h-$$" 2>/dev/null
	done
	ip netns del "$sw" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

ns_of() { echo "npx-sc-$1-$$"; }

setup() {
	local h ns
	ip netns add "$sw" || return 1
	ip -n "$sw" link add br0 type bridge || return 1
	ip -n "$sw" link set br0 up || return 1
	for ((h = 0; h < hosts; h++)); do
		ns=$(ns_of $h)
		ip netns add "$ns" || return 1
		ip link add "npxs$h-$$" netns "$ns" type veth peer name "p$h" netns "$sw" || return 1
		ip -n "$ns" link set "npxs$h-$$" name eth0 || return 1
		ip -n "$sw" link set "p$h" master br0 || return 1
		ip -n "$sw" link set "p$h" up || return 1
		ip -n "$ns" addr add "10.79.0.$((h + 1))/24" dev eth0 || return 1
		ip -n "$ns" link set lo up || return 1
		ip -n "$ns" link set eth0 up || return 1
	done
}
if ! err=$(setup 2>&1); then
	tap_skip_all "cannot set up $hosts namespaces on a bridge: $err"
fi

tap_plan 4

rdzv_ms=60000
port=$((20000 + $$ % 20000))

# start_job JOB HOLD_MS TIMEOUT_MS SIZES: every rank in the background,
# rank r on host r / per; output in $tmp/<job>.rank<R>.out.
start_job() {
	local r out
	for ((r = 0; r < n; r++)); do
		out=$tmp/$1.rank$r.out
		: >"$out"
		ip netns exec "$(ns_of $((r / per)))" env FI_PROVIDER="$provider" FI_TCP_IFACE=eth0 FI_NET_IFACE=eth0 \
			NPROXY_ROOT_COMM_ID="10.79.0.1:$port" NPROXY_NET_RDZV_TIMEOUT_MS=$rdzv_ms \
			nice "$bin" --rank "$r" --ranks "$n" --timeout-ms "$3" --sizes "$4" \
			--hold-ms "$2" --idle-nap-us 200 >"$out" 2>&1 &
		pids[r]=$!
	done
}

now_ms() { date +%s%3N; }

# wait_job DEADLINE_S: exit codes in rc[], when each rank was seen gone in
# ended_ms[] (ms); a rank still running at the deadline is killed.
wait_job() {
	local end=$((SECONDS + $1)) r left
	ended_ms=()
	while :; do
		left=0
		for ((r = 0; r < n; r++)); do
			[[ -n ${ended_ms[r]:-} ]] && continue
			if kill -0 "${pids[r]}" 2>/dev/null; then
				left=1
			else
				ended_ms[r]=$(now_ms)
			fi
		done
		((left && SECONDS < end)) || break
		sleep 0.1
	done
	for ((r = 0; r < n; r++)); do
		if kill -0 "${pids[r]}" 2>/dev/null; then
			echo "rank $r still running: killed by the test" >>"$tmp/$job.rank$r.out"
			kill -9 "${pids[r]}" 2>/dev/null
			ended_ms[r]=$(now_ms)
		fi
		wait "${pids[r]}" 2>/dev/null
		rc[r]=$?
	done
}

# 1. Connections made by the open.
job=held
start_job $job 8000 5000 1,65537
end=$((SECONDS + 150))
while (($(cat "$tmp"/$job.rank*.out 2>/dev/null | grep -c ': open$') < n)) && ((SECONDS < end)); do
	sleep 0.2
done
opened=$(cat "$tmp"/$job.rank*.out | grep -c ': open$')
missing=
for ((h = 0; h < hosts; h++)); do
	next=10.79.0.$(((h + 1) % hosts + 1))
	# Established, to or from the next host, not the rendezvous port.
	c=$(ip netns exec "$(ns_of $h)" ss -Htn state established 2>/dev/null |
		grep -F "$next:" | grep -vc ":$port\b")
	((c > 0)) || missing+=" host$h->$next"
done
if ((opened == n)) && [[ -z $missing ]]; then
	tap_ok "$n ranks on $hosts hosts: every host is connected to the next when nproxy_net_open() returns"
else
	tap_fail "connections up at open" "$opened of $n ranks opened; no connection:$missing" \
		"$(tail -n 3 "$tmp"/$job.rank0.out)"
fi
# The held ranks have shown what they had to; their ops are not the point.
for ((r = 0; r < n; r++)); do kill -9 "${pids[r]}" 2>/dev/null; wait "${pids[r]}" 2>/dev/null; done

# 2. No false dead peer with a 5 s engine deadline, straight into the ops.
job=straight
port=$((port + 1))
start_job $job 0 5000 1,4096,1048576
wait_job 300
bad=0
for ((r = 0; r < n; r++)); do ((rc[r])) && bad=$((bad + 1)); done
if ((bad == 0)); then
	tap_ok "$n ranks on $hosts hosts, 5 s engine deadline: the first op finds every peer alive"
else
	tap_fail "5 s engine deadline" "$bad of $n ranks failed" "$(grep -h . "$tmp"/$job.rank*.out | head -n 8)"
fi

# 3. A partition names the host that cannot be reached.
job=partition
port=$((port + 1))
big=8388608
start_job $job 0 5000 1,$big,$big,$big,$big,$big,$big,$big,$big,$big,$big,$big,$big,$big,$big
end=$((SECONDS + 150))
while ! grep -q "size $big ok" "$tmp"/$job.rank*.out 2>/dev/null && ((SECONDS < end)); do
	sleep 0.2
done
ip -n "$(ns_of 1)" link set eth0 down
wait_job 120
victim=$((2 * per))	# its predecessor, rank 2 * per - 1, is on host 1
if grep -q "10.79.0.2" "$tmp/$job.rank$victim.out" && ! grep -q "killed by the test" "$tmp"/$job.rank*.out; then
	tap_ok "host 1 cut off: rank $victim names its address ($(grep -o 'host [^)]*10.79.0.2[^)]*' "$tmp/$job.rank$victim.out" | head -n 1))"
else
	tap_fail "partition" "rank $victim does not name 10.79.0.2, or a rank was left running" \
		"$(grep -h . "$tmp/$job.rank$victim.out" | tail -n 3)"
fi

# 4. nproxy-run: a rank killed on host 1 ends every rank on every host.
# wait_exits: each rank's exit time (ms since the epoch) in ended_ms[] and
# its status in rc[]; a rank still running at the deadline is killed.
if [[ ! -x $run ]]; then
	tap_skip "nproxy-run kill across hosts" "nproxy-run not built ($run)"
	tap_done
fi
ip -n "$(ns_of 1)" link set eth0 up	# test 3 cut it off
job=kill
port=$((port + 1))
victim=$((per + 1 < n ? per + 1 : n - 1))	# host 1 when there is one
vhost=10.79.0.$((victim / per + 1))
bound_s=${NPROXY_SCALE_KILL_BOUND_S:-10}
for ((r = 0; r < n; r++)); do
	out=$tmp/$job.rank$r.out
	ip netns exec "$(ns_of $((r / per)))" env FI_TCP_IFACE=eth0 FI_NET_IFACE=eth0 NPROXY_HANDSHAKE=memfd \
		NPROXY_RANK=$r NPROXY_WORLD_SIZE=$n NPROXY_LOCAL_RANK=$((r % per)) NPROXY_LOCAL_SIZE=$per \
		NPROXY_ROOT_COMM_ID="10.79.0.1:$port" NPROXY_NET_RDZV_TIMEOUT_MS=$rdzv_ms \
		NPROXY_RUN_KILL=$victim:3 \
		nice "$run" --provider "$provider" --size 4K --iters 200 --warmup 1 --timeout 280 \
		>"$out" 2>&1 &
	pids[r]=$!
done
wait_job 300
kill_ms=${ended_ms[victim]}
slowest=0 unnamed="" late="" zero=""
for ((r = 0; r < n; r++)); do
	((r == victim)) && continue
	d=$((ended_ms[r] - kill_ms))
	((d > slowest)) && slowest=$d
	((d > bound_s * 1000)) && late+=" $r"
	((rc[r] == 0)) && zero+=" $r"
	grep -qE "rank $victim \(pid ${pids[victim]}, host [^)]*$vhost:" "$tmp/$job.rank$r.out" ||
		unnamed+=" $r"
done
tap_diag "rank $victim (pid ${pids[victim]}) on host $vhost killed; the last of the other $((n - 1)) ranks ended $slowest ms after it"
if [[ -z $late$unnamed$zero ]] && ! grep -q "killed by the test" "$tmp"/$job.rank*.out; then
	tap_ok "$n ranks on $hosts hosts (nproxy-run): rank $victim killed on host $vhost, every other rank ended within ${bound_s} s ($slowest ms) naming rank $victim, its pid and host"
else
	first=($unnamed $late $zero)
	tap_fail "kill across hosts" "ended later than ${bound_s} s:${late:- none}" \
		"not naming rank $victim (pid ${pids[victim]}, host $vhost):${unnamed:- none}" \
		"exit 0 (not failed):${zero:- none}" \
		"$(tail -n 4 "$tmp/$job.rank${first[0]:-0}.out")"
fi
tap_done
