#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# MPICH's Hydra launcher (mpiexec) announces ranks as PMI_RANK/PMI_SIZE and
# MPI_LOCALRANKID/MPI_LOCALNRANKS.  Debian's MPICH cannot be installed
# beside Open MPI's mpirun here, so the variables are set by hand, as Hydra
# sets them: two processes on lo, rank 0 reports launcher "mpich".
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tap_tmpdir
export NPROXY_HANDSHAKE=memfd
clean=(env -u NPROXY_RANK -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID
	-u SLURM_NTASKS -u PMIX_RANK -u PMI_RANK -u PMI_SIZE)

tap_plan 3
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
	"${clean[@]}" PMI_RANK=$r PMI_SIZE=2 MPI_LOCALRANKID=$r MPI_LOCALNRANKS=2 \
		NPROXY_ROOT_COMM_ID=127.0.0.1:$port FI_TCP_IFACE=lo \
		timeout 120 "$RUN" --provider 'tcp;ofi_rxm' --collective allreduce --size 16K \
		--iters 3 --warmup 1 --json --timeout 90 >"$tmp/r.$r" 2>"$tmp/r.$r.err" &
	pids+=($!)
done
rcs=
for p in "${pids[@]}"; do wait "$p"; rcs+=" $?"; done
if [[ $rcs == " 0 0" ]] && python3 - "$tmp/r.0" <<'PY' && [[ ! -s $tmp/r.1 ]]
import json, sys
d = json.load(open(sys.argv[1]))
assert d["launcher"] == "mpich" and d["world_size"] == 2 and d["procs"] == 2, d
assert d["results"][0]["verified"], d
PY
then
	tap_ok "PMI_RANK/PMI_SIZE launch, 2 ranks: launcher mpich, verified, only rank 0 reports"
else
	tap_fail "PMI_RANK/PMI_SIZE launch" "exit statuses:$rcs" "$(cat "$tmp"/r.*)"
fi

out=$("${clean[@]}" PMI_RANK=2 PMI_SIZE=2 timeout 30 "$RUN" 2>&1)
rc=$?
if ((rc == 2)) && [[ $out == *"PMI_RANK=2 is not below PMI_SIZE=2"* ]]; then
	tap_ok "PMI_RANK >= PMI_SIZE is a usage error naming both"
else
	tap_fail "PMI_RANK >= PMI_SIZE is a usage error" "exit $rc" "$out"
fi
out=$("${clean[@]}" PMI_RANK=0 timeout 30 "$RUN" 2>&1)
rc=$?
if ((rc == 2)) && [[ $out == *"PMI_RANK is set but PMI_SIZE is not"* ]]; then
	tap_ok "PMI_RANK without PMI_SIZE: cannot tell the world size"
else
	tap_fail "PMI_RANK without PMI_SIZE" "exit $rc" "$out"
fi
tap_done
