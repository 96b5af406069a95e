#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run started by a launcher, one process per rank: by hand with
# NPROXY_RANK/NPROXY_WORLD_SIZE + NPROXY_ROOT_COMM_ID (tcp;ofi_rxm on lo),
# across two network namespaces joined by a veth pair (two "hosts"), and
# under Open MPI's mpirun from its environment variables (libpmix not
# loaded: run_pmix.sh covers the PMIx path).  Rank 0 prints the results; every rank exits 0.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tmp=$(mktemp -d)
ns_a=nprx-a-$$
ns_b=nprx-b-$$
cleanup() {
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
export NPROXY_HANDSHAKE=memfd

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- by hand, two processes on lo
port=$(free_port)
pids=()
for r in 0 1; do
	env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMIX_RANK \
		NPROXY_RANK=$r NPROXY_WORLD_SIZE=2 NPROXY_LOCAL_RANK=$r NPROXY_LOCAL_SIZE=2 \
		NPROXY_ROOT_COMM_ID=127.0.0.1:$port FI_TCP_IFACE=lo \
		timeout 120 "$RUN" --provider 'tcp;ofi_rxm' --collective allreduce --size 64K \
		--iters 3 --warmup 1 --json --timeout 90 >"$tmp/hand.$r" 2>"$tmp/hand.$r.err" &
	pids+=($!)
done
rcs=
for p in "${pids[@]}"; do wait "$p"; rcs+=" $?"; done
if [[ $rcs == " 0 0" ]] && python3 - "$tmp/hand.0" <<'PY' && [[ ! -s $tmp/hand.1 ]]
import json, sys
d = json.load(open(sys.argv[1]))
assert d["launcher"] == "nproxy" and d["world_size"] == 2 and d["procs"] == 2, d
assert d["provider"] == "tcp;ofi_rxm" and d["results"][0]["verified"], d
PY
then
	tap_ok "NPROXY_RANK launch, 2 ranks over tcp;ofi_rxm: verified, only rank 0 reports"
else
	tap_fail "NPROXY_RANK launch" "exit statuses:$rcs" "$(cat "$tmp"/hand.*)"
fi

# ---- two "hosts": network namespaces joined by a veth pair
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
	tap_skip "two namespaces over veth" "needs root and ip(8)"
elif ! ip netns add "$ns_a" 2>/dev/null || ! ip netns add "$ns_b" 2>/dev/null; then
	tap_skip "two namespaces over veth" "cannot create network namespaces here"
else
	ip link add va-$$ netns "$ns_a" type veth peer name vb-$$ netns "$ns_b"
	ip -n "$ns_a" addr add 10.231.0.1/24 dev va-$$
	ip -n "$ns_b" addr add 10.231.0.2/24 dev vb-$$
	for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
	ip -n "$ns_a" link set va-$$ up
	ip -n "$ns_b" link set vb-$$ up
	# run_ns_pair: both ranks, one per namespace; sets rcs.
	run_ns_pair() {
		local r ns dev p
		pids=()
		for r in 0 1; do
			ns=$ns_a; dev=va-$$
			((r == 1)) && ns=$ns_b && dev=vb-$$
			ip netns exec "$ns" env NPROXY_RANK=$r NPROXY_WORLD_SIZE=2 NPROXY_LOCAL_RANK=0 \
				NPROXY_LOCAL_SIZE=1 NPROXY_ROOT_COMM_ID=10.231.0.1:29500 FI_TCP_IFACE=$dev \
				timeout 120 "$RUN" --provider 'tcp;ofi_rxm' --size 16K,256K --iters 3 \
				--warmup 1 --timeout 60 >"$tmp/ns.$r" 2>&1 &
			pids+=($!)
		done
		rcs=
		for p in "${pids[@]}"; do wait "$p"; rcs+=" $?"; done
	}
	run_ns_pair
	# A known engine race: on tcp;ofi_rxm across namespaces the
	# first host-barrier send sometimes fails with EINVAL while rxm is still
	# connecting.  Retry that one failure once, visibly; anything else fails.
	if [[ $rcs != " 0 0" ]] && grep -q "host barrier: send to rank 0: Invalid argument" "$tmp"/ns.*; then
		tap_diag "first attempt hit the rxm connect race (EINVAL on the host barrier send); retrying once"
		run_ns_pair
	fi
	if [[ $rcs == " 0 0" ]] && grep -Eq "^ +256K +[0-9]+ +uint32 +[a-z]+ +3 .* 0 +1$" "$tmp/ns.0"; then
		tap_ok "two namespaces over veth: 2 ranks, verified"
	else
		tap_fail "two namespaces over veth" "exit statuses:$rcs" "$(cat "$tmp"/ns.*)"
	fi
fi

# ---- Open MPI
if ! command -v mpirun >/dev/null; then
	tap_skip "mpirun launch" "no mpirun (openmpi-bin)"
else
	port=$(free_port)
	as_root=
	[[ $(id -u) == 0 ]] && as_root=--allow-run-as-root
	out=$(timeout 120 mpirun $as_root --oversubscribe -np 3 --mca btl self \
		-x NPROXY_ROOT_COMM_ID=127.0.0.1:$port -x NPROXY_HANDSHAKE=memfd -x FI_TCP_IFACE=lo \
		-x NPROXY_PMIX_LIB=/nonexistent/libpmix.so.2 \
		"$RUN" --provider 'tcp;ofi_rxm' --collective sendrecv --size 8K --iters 3 --warmup 1 \
		--json --timeout 90 2>"$tmp/mpi.err")
	rc=$?
	if ((rc == 0)) && python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); sys.exit(0 if d["launcher"]=="openmpi" and d["world_size"]==3 and d["results"][0]["verified"] else 1)' <<<"$out"; then
		tap_ok "mpirun -np 3: Open MPI environment detected, verified"
	elif grep -qiE "not enough slots|No network interfaces|PMIx|orte|prte" "$tmp/mpi.err" && ((rc != 0)); then
		tap_skip "mpirun launch" "mpirun cannot start here: $(head -c 200 "$tmp/mpi.err")"
	else
		tap_fail "mpirun -np 3" "exit $rc" "$out" "$(cat "$tmp/mpi.err")"
	fi
fi
tap_done
