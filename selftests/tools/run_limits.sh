#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run at the host's limits fails fast, with the cause in the last
# line:
#  - 64 ranks in one process (-p 1 -r 64) and 64 processes (-p 64) run
#    under `ulimit -n 1024` (the bus holds O(ranks) descriptors per host);
#  - buffers that do not fit in memory (here a memory cgroup of 256 MB
#    for 2 ranks of 256 MB each) are refused before any is touched:
#    "would need N GB, M GB available", exit 5, not an OOM kill.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd timeout

tap_tmpdir
export NPROXY_HANDSHAKE=memfd
tap_plan 3

for layout in "-p 1 -r 64" "-p 64"; do
	# shellcheck disable=SC2086 # the layout is two options
	out=$( (ulimit -n 1024 && timeout 300 nice "$RUN" $layout --size 1K --iters 2 --warmup 1 \
		--timeout 240 --quiet) 2>&1)
	rc=$?
	if ((rc == 0)); then
		tap_ok "$layout under ulimit -n 1024"
	else
		tap_fail "$layout under ulimit -n 1024" "exit $rc" "$(tail -n 5 <<<"$out")"
	fi
done

cg=
mem=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
base=/sys/fs/cgroup/memory$mem
if [[ -n $mem && -w $base ]] && mkdir "$base/npx-limits-$$" 2>/dev/null; then
	cg=$base/npx-limits-$$
fi
if [[ -z $cg ]]; then
	tap_skip "buffers beyond the memory cgroup" "cannot create a memory cgroup (v1) here"
else
	trap 'rmdir "$cg" 2>/dev/null' EXIT
	echo $((256 << 20)) >"$cg/memory.limit_in_bytes"
	start=$SECONDS
	out=$(bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$cg" \
		timeout 120 "$RUN" -p 2 --size 256M --iters 1 --warmup 0 --timeout 100 2>&1)
	rc=$?
	last=$(tail -n 1 <<<"$out")
	if ((rc == 5)) && [[ $last == *"would need "*" GB, "*" GB available"* ]] &&
		((SECONDS - start < 60)); then
		tap_ok "buffers beyond the memory cgroup: refused up front ($last)"
	else
		tap_fail "buffers beyond the memory cgroup" "exit $rc after $((SECONDS - start)) s" \
			"$(tail -n 5 <<<"$out")"
	fi
fi
