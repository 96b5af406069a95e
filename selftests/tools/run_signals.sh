#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run stopped the way a terminal stops a job: SIGINT (Ctrl-C), SIGHUP
# (terminal closed) and SIGTERM sent to the whole process group, as a
# terminal or `kill -- -PGID` does, and SIGTERM sent to one rank alone.
# Every time: exit 128+N, the finished rows and the footer on stdout, no
# rank blamed, no rank left running, no libfabric shm file of the job left
# in /dev/shm.  Each case runs several times: a rank that died of the
# group's signal used to be blamed only some of the time.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd setsid timeout

tap_tmpdir
pid=
cleanup() {
	[[ -n $pid ]] && kill -KILL -- "-$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
export NPROXY_HANDSHAKE=memfd
unset NPROXY_RANK OMPI_COMM_WORLD_RANK SLURM_PROCID PMIX_RANK PMI_RANK

REPEAT=${NPROXY_TEST_SIGNAL_REPEAT:-3}
CASES=("INT group 130" "HUP group 129" "TERM group 143" "TERM rank 143")
tap_plan $((${#CASES[@]} * REPEAT))

# wait_for FILE REGEX BOUND_S: poll until FILE has a line matching REGEX.
wait_for() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# one_case SIG TARGET EXPECTED_EXIT ROUND
one_case() {
	local sig=$1 target=$2 want=$3 round=$4 desc rc i ranks r left= shm=
	desc="SIG$sig to the $target, round $round: exit $want, rows and footer kept, nobody blamed, nothing left"
	# Emptied here, not by the background job's own redirection: that one
	# may come after wait_for has read the last round's rows.
	: >"$tmp/out"
	: >"$tmp/err"
	# A new session: the job is its own process group, as under a terminal.
	setsid "$RUN" -p 4 -s 4K,8K,16K,32K -n 3 -w 0 --device-delay-us 300000 --timeout 100 \
		>"$tmp/out" 2>"$tmp/err" &
	pid=$!
	if ! wait_for "$tmp/out" '^ +4K +1024 +uint32' 90; then
		tap_fail "$desc" "no row before the signal" "$(cat "$tmp/out" "$tmp/err")"
		kill -KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
		return
	fi
	ranks=$(cat /proc/"$pid"/task/*/children 2>/dev/null)
	if [[ $target == group ]]; then
		kill "-$sig" -- "-$pid"
	else
		# shellcheck disable=SC2086
		set -- $ranks
		kill "-$sig" "$2"
	fi
	for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	wait "$pid"
	rc=$?
	pid=
	sleep 0.2
	for r in $ranks; do
		[[ -e /proc/$r ]] && left+=" $r"
		compgen -G "/dev/shm/$r:*" >/dev/null && shm+=" $(echo /dev/shm/"$r":*)"
	done
	if ((rc == want)) && grep -Eq '^ +4K +1024 +uint32 ' "$tmp/out" &&
	   grep -q '^# Avg bus bandwidth .*interrupted' "$tmp/out" &&
	   grep -q "^nproxy-run: interrupted by signal $((want - 128)) (SIG$sig): ranks stopped$" "$tmp/err" &&
	   ! grep -Eq 'rank [0-9]+ \(pid|peer rank|killed by' "$tmp/err" && [[ -z $left$shm ]]; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "exit $rc" "ranks still running:${left:- none}" "shm files left:${shm:- none}" \
			"stdout:" "$(cat "$tmp/out")" "stderr:" "$(cat "$tmp/err")"
	fi
}

for c in "${CASES[@]}"; do
	# shellcheck disable=SC2086
	for ((round = 1; round <= REPEAT; round++)); do one_case $c "$round"; done
done
tap_done
