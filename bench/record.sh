# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# record.sh: what a benchmark group sources to leave its numbers for the
# report (bench/report.py).  bench/run sets BENCH_RECORDS to the group's
# record file (build/bench/report/raw/<group>.tsv); a group run on its own,
# without it, records nothing and just prints its table as before.
#
# One record per line, fields separated by tabs (so labels may hold spaces):
#   table   ID TITLE XLABEL YLABEL BETTER(lower|higher) XSCALE(log|linear|category) GROUP
#   sample  ID SERIES ROLE(nproxy|baseline) PAIR X ROUND VALUE P99(or -)
#   note    ID TEXT
#   meta    KEY VALUE
#   group   NAME STATUS(ok|failed|skipped) DETAIL SECONDS
#   steal   GROUP ROUND STEAL_PCT VERDICT(ok|rerun|invalid)
#   flag    ID SERIES X ROUND TEXT   (one round's sample is suspect: TEXT says why)
# A sample is one round's figure for one series at one x (typically the
# median over that round's iterations, with the round's p99 beside it).  A
# series' ratio is taken against every baseline series of the same table
# with the same PAIR key at the same X, round by round.

# rec_table ID TITLE XLABEL YLABEL BETTER XSCALE
rec_table() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'table\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
		"${BENCH_GROUP:-?}" >>"$BENCH_RECORDS"
}

# rec_sample ID SERIES ROLE PAIR X ROUND VALUE [P99]
rec_sample() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'sample\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
		"${8:--}" >>"$BENCH_RECORDS"
}

# rec_note ID TEXT
rec_note() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'note\t%s\t%s\n' "$1" "$2" >>"$BENCH_RECORDS"
}

# rec_meta KEY VALUE
rec_meta() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'meta\t%s\t%s\n' "$1" "$2" >>"$BENCH_RECORDS"
}

# rec_flag ID SERIES X ROUND TEXT: that round's figure of SERIES at X is
# suspect (a baseline starved of CPU, ...); the report shows TEXT beside it.
rec_flag() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'flag\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$BENCH_RECORDS"
}

# ---- steal time ---------------------------------------------------------------
# On a virtual machine the hypervisor may run someone else on "our" CPUs:
# /proc/stat's steal column counts that time.  A round taken while much of
# the CPU was stolen measures the neighbours, not nproxy nor its baseline.
# BENCH_MAX_STEAL_PCT (default 10): above it a round is heavy-steal.

# steal_snapshot: "STEAL TOTAL" jiffies over every CPU (user..steal; guest
# time is already inside user and nice).
steal_snapshot() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9 && i <= NF; i++) t += $i
		print (NF >= 9 ? $9 : 0), t; exit }' "${BENCH_PROC_STAT:-/proc/stat}"
}

# steal_pct "BEFORE" "AFTER": percent of the CPU time stolen in between.
steal_pct() {
	awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); dt = y[2] - x[2]
		printf "%.1f", (dt > 0 ? 100 * (y[1] - x[1]) / dt : 0) }'
}

# steal_heavy PCT: true above BENCH_MAX_STEAL_PCT.
steal_heavy() {
	awk -v p="$1" -v m="${BENCH_MAX_STEAL_PCT:-10}" 'BEGIN { exit !(p + 0 > m + 0) }'
}

# rec_steal ROUND PCT VERDICT
rec_steal() {
	[[ -n ${BENCH_RECORDS:-} ]] || return 0
	printf 'steal\t%s\t%s\t%s\t%s\n' "${BENCH_GROUP:-?}" "$1" "$2" "$3" >>"$BENCH_RECORDS"
}

# steal_round LABEL CMD...: run one round (CMD) and record the steal over
# it.  A round under heavy steal is refused: recorded as "rerun" and run
# once more; if the second attempt is heavy-steal too it is kept, recorded
# "invalid" (the report says so).  CMD must record nothing itself, or drop
# what its earlier attempt left: only the last attempt may count.
# Returns CMD's status.
steal_round() {
	local label=$1 s0 s1 pct rc attempt
	shift
	for attempt in 1 2; do
		s0=$(steal_snapshot)
		"$@"
		rc=$?
		s1=$(steal_snapshot)
		pct=$(steal_pct "$s0" "$s1")
		if ((rc != 0)) || ! steal_heavy "$pct"; then
			rec_steal "$label" "$pct" ok
			return $rc
		fi
		if ((attempt == 1)); then
			rec_steal "$label" "$pct" rerun
			echo "bench: $label ran under $pct% steal (> ${BENCH_MAX_STEAL_PCT:-10}%): refused, running it once more" >&2
		fi
	done
	rec_steal "$label" "$pct" invalid
	echo "bench: $label ran under $pct% steal again: kept, marked invalid in the report" >&2
	return $rc
}

# nproxy_shm_copy NPROXY_RUN: how that nproxy-run's shm copies large messages
# here ("CMA off (auto: ...)", its --json shm_copy; empty if it cannot say),
# for the baselines that must use the same protocol (coll_run.sh, net_run.sh).
nproxy_shm_copy() {
	"$1" -q -p 2 -c allgather -s 1K -n 1 -w 0 --json 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin).get("shm_copy") or "")' 2>/dev/null
}
