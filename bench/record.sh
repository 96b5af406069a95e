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
