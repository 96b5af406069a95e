#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What `make run` runs: build/bin/nproxy-run with no arguments.  Defaults
# must work on any Linux box without the module: memfd handshake, shm
# provider, 4 forked ranks, the 1K..1M sweep, every size verified.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd timeout

# Exactly the defaults (no NPROXY_HANDSHAKE / FI_PROVIDER from the caller),
# unless the module is loaded here, in which case auto would pick it.
start=$SECONDS
out=$(env -u NPROXY_HANDSHAKE -u FI_PROVIDER -u NPROXY_RANK -u OMPI_COMM_WORLD_RANK \
	-u SLURM_PROCID -u PMIX_RANK timeout 120 "$RUN" 2>&1)
rc=$?
took=$((SECONDS - start))
tap_diag "nproxy-run with defaults took ${took} s"
if ((rc == 0)); then tap_ok "exit 0"; else tap_fail "exit 0" "exit $rc" "$out"; fi
want_hs=memfd
[[ -e /dev/nproxy ]] && want_hs=kmod
if grep -Eq "^# nproxy-run .*: allgather, 4 ranks \(4 procs x 1\), provider shm, handshake $want_hs," <<<"$out"; then
	tap_ok "header: allgather, 4 ranks, shm, $want_hs"
else
	tap_fail "header: allgather, 4 ranks, shm, $want_hs" "$out"
fi
rows=$(grep -Ec "^ +(1K|4K|16K|64K|256K|1M) +[0-9]+ +uint32 +none +20 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +1$" <<<"$out")
if [[ $rows == 6 ]]; then
	tap_ok "six sizes 1K..1M, 20 iterations each, all verified, one proxy thread per process"
else
	tap_fail "six verified rows" "$rows rows matched" "$out"
fi
tap_done
