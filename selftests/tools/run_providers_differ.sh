#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two launched ranks given different libfabric providers (shm and
# tcp;ofi_rxm) both fail at once, each saying that the providers differ and
# naming the other rank's provider, instead of one failing in fi_av_insert
# while the other waits for it until its deadline.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout fi_info
fi_info -p shm >/dev/null 2>&1 || tap_skip_all "libfabric has no shm provider here"
fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1 || tap_skip_all "libfabric has no tcp;ofi_rxm provider here"
tap_tmpdir
export NPROXY_HANDSHAKE=memfd
tap_plan 2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
provs=(shm 'tcp;ofi_rxm')
start=$SECONDS
pids=()
for r in 0 1; do
	env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMIX_RANK -u PMI_RANK \
		NPROXY_RANK=$r NPROXY_WORLD_SIZE=2 NPROXY_LOCAL_RANK=$r NPROXY_LOCAL_SIZE=2 \
		NPROXY_ROOT_COMM_ID=127.0.0.1:$port FI_TCP_IFACE=lo \
		timeout 120 "$RUN" --provider "${provs[r]}" --size 4K --iters 2 --timeout 60 \
		>"$tmp/out.$r" 2>&1 &
	pids+=($!)
done
rcs=
for p in "${pids[@]}"; do wait "$p"; rcs+=" $?"; done
took=$((SECONDS - start))

if [[ $rcs != *" 0"* ]] &&
   grep -q "providers differ: rank 1 uses 'tcp;ofi_rxm', rank 0 (this one) uses 'shm'" "$tmp/out.0" &&
   grep -q "providers differ: rank 0 uses 'shm', rank 1 (this one) uses 'tcp;ofi_rxm'" "$tmp/out.1"; then
	tap_ok "both ranks fail saying the providers differ, naming the other's provider"
else
	tap_fail "both ranks say the providers differ" "exits:$rcs" "$(cat "$tmp/out.0" "$tmp/out.1")"
fi
# The deadline is 60 s: a rank left waiting for the other would take that long.
if ((took < 20)); then
	tap_ok "both ranks end at once (${took} s, deadline 60 s)"
else
	tap_fail "both ranks end at once" "took ${took} s" "$(cat "$tmp/out.0" "$tmp/out.1")"
fi
tap_done
