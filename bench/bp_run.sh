#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Bananaphone benchmark: barrier and 64 B / 4 KiB all-gather latency for
# 2, 4, 8 local ranks, side by side in one run with two baselines:
#   unix_star  a simple Unix-socket star rendezvous (bench/bp_star.c)
#   openmpi    Open MPI's MPI_Barrier / MPI_Allgather (bench/bp_mpi.mpi.c)
# and one table with ratios (baseline / bananaphone: > 1 means Bananaphone
# is faster).  Numbers, not pass/fail: this machine is shared and noisy.
#
#   bench/bp_run.sh [ranks=2,4,8] [iters=1000] [warmup=100]
# QUICK=1: 200 iterations after 20; ROUNDS (default 1): interleaved rounds.
# Under bench/run (BENCH_RECORDS set) it records each round's median per
# (op, ranks, implementation) for the report (bench/record.sh).
# Run from the source tree (uses build/bench/) or from build/bench/.
set -u
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then RANKS=${1:-2,4,8} ITERS=${2:-200} WARMUP=${3:-20}
else RANKS=${1:-2,4,8} ITERS=${2:-1000} WARMUP=${3:-100}; fi
ROUNDS=${ROUNDS:-1}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/record.sh"
if [ -x "$here/bp_bench" ]; then bin=$here; else bin=$here/../build/bench; fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for b in bp_bench bp_star; do
	if [ ! -x "$bin/$b" ]; then
		echo "bp_run: $bin/$b missing (make -C bench)" >&2
		exit 1
	fi
done

echo "# bp_run: ranks $RANKS, $ITERS calls after $WARMUP warm-up, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
# A round: bananaphone, Unix-socket star, Open MPI, one after the other
# (A B C A B C ...: load drift hits all three alike).  The table below shows
# the last round; the report (under bench/run) has every round.
have_mpi=0
if [ -x "$bin/bp_mpi" ] && command -v mpirun >/dev/null; then have_mpi=1; fi
for ((r = 1; r <= ROUNDS; r++)); do
	timeout 600 "$bin/bp_bench" -r "$RANKS" -i "$ITERS" -w "$WARMUP" | sed "s/^RESULT/RESULT round=$r/" >>"$out" ||
		echo "# bp_bench failed" >&2
	timeout 600 "$bin/bp_star" -r "$RANKS" -i "$ITERS" -w "$WARMUP" | sed "s/^RESULT/RESULT round=$r/" >>"$out" ||
		echo "# bp_star failed" >&2
	((have_mpi)) || continue
	for n in ${RANKS//,/ }; do
		# As root Open MPI needs --allow-run-as-root; --oversubscribe
		# for more ranks than cpus (it then yields while polling).
		timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$n" \
			"$bin/bp_mpi" -i "$ITERS" -w "$WARMUP" 2>/dev/null | sed "s/^RESULT/RESULT round=$r/" >>"$out" ||
			echo "# bp_mpi failed at $n ranks" >&2
	done
done
mpi_note=""
((have_mpi)) || mpi_note="openmpi: n/a (no mpicc/mpirun: install openmpi-bin libopenmpi-dev)"

# Death detection (the project's bound: 100 ms): survivors' time from the
# SIGKILL of the last rank to their NPROXY_PEER_DEAD, over 5 kills.
kills=5
[[ $QUICK == 1 ]] && kills=3
death=$(timeout 300 "$bin/bp_bench" -d -r "$RANKS" -i $kills) || echo "# bp_bench -d failed" >&2

awk -v note="$mpi_note" '
/^RESULT/ {
	delete f
	for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	key = f["op"] "|" f["size"] "|" f["ranks"]
	if (!(key in seen)) { seen[key] = 1; keys[nk++] = key }
	avg[key, f["impl"]] = f["avg_us"]; p50[key, f["impl"]] = f["p50_us"]
}
function cell(k, impl) {
	if ((k, impl) in avg) return sprintf("%9.2f %9.2f", avg[k, impl], p50[k, impl])
	return sprintf("%9s %9s", "n/a", "n/a")
}
function ratio(k, impl, arr) {
	if ((k, impl) in arr && (k, "bananaphone") in arr && arr[k, "bananaphone"] > 0)
		return sprintf("%7.2fx", arr[k, impl] / arr[k, "bananaphone"])
	return sprintf("%8s", "n/a")
}
END {
	printf "%-10s %5s %5s | %-19s | %-19s | %-19s | %-17s | %-17s\n", "op", "bytes", "ranks",
		"bananaphone", "unix_star", "openmpi", "star/bp mean p50", "mpi/bp mean p50"
	printf "%-10s %5s %5s | %9s %9s | %9s %9s | %9s %9s |\n", "", "", "", "mean_us", "p50_us",
		"mean_us", "p50_us", "mean_us", "p50_us"
	for (i = 0; i < nk; i++) {
		k = keys[i]; split(k, p, "|")
		printf "%-10s %5s %5s | %s | %s | %s | %s %s | %s %s\n", p[1], p[2], p[3],
			cell(k, "bananaphone"), cell(k, "unix_star"), cell(k, "openmpi"),
			ratio(k, "unix_star", avg), ratio(k, "unix_star", p50),
			ratio(k, "openmpi", avg), ratio(k, "openmpi", p50)
	}
	if (note != "") print "# " note
}' "$out"
echo
echo "death detection (bananaphone): time from SIGKILL of one rank to every survivor's NPROXY_PEER_DEAD"
echo "$death" | awk '/^RESULT/ {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	printf "  %2s ranks: mean %6.1f ms  median %6.1f ms  max %6.1f ms  (%s kills)\n", f["ranks"],
		f["avg_us"] / 1000, f["p50_us"] / 1000, f["max_us"] / 1000, f["iters"]
}'

# ---- records for the report ---------------------------------------------------
if [[ -n ${BENCH_RECORDS:-} ]]; then
	for t in "barrier 0" "allgather 64" "allgather 4096"; do
		read -r op size <<<"$t"
		id=bp_$op; ((size)) && id+=_$size
		what=$op; ((size)) && what+=" of $size B per rank"
		rec_table "$id" "Bananaphone $what: latency vs rank count, vs Open MPI and a Unix-socket star" \
			ranks "latency per call (us, median over calls)" lower linear
		rec_note "$id" "Per round: bp_bench (bananaphone), bp_star (Unix-socket star), then Open MPI (one mpirun per rank count), $ITERS calls after $WARMUP warm-up each; a round's figure is the median over calls (median over ranks). Ratio = bananaphone / baseline: below 1, Bananaphone is faster."
	done
	awk '/^RESULT/ { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		if (f["op"] == "detect_death") next
		id = "bp_" f["op"]; if (f["size"] + 0) id = id "_" f["size"]
		role = f["impl"] == "bananaphone" ? "nproxy" : "baseline"
		name = f["impl"] == "unix_star" ? "Unix-socket star" : (f["impl"] == "openmpi" ? "Open MPI" : f["impl"])
		printf "%s\t%s\t%s\t%s\t%s\t%s\n", id, name, role, f["ranks"], f["round"], f["p50_us"] }' "$out" |
		while IFS=$'\t' read -r id name role ranks rnd v; do
			rec_sample "$id" "$name" "$role" "" "$ranks" "$rnd" "$v"
		done
	rec_table bp_death "Bananaphone death detection: SIGKILL of one rank -> every survivor's NPROXY_PEER_DEAD" \
		ranks "ms (median over kills; p99 column: the maximum)" lower linear
	echo "$death" | awk '/^RESULT/ { delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		printf "%s\t%s\t%s\n", f["ranks"], f["p50_us"] / 1000, f["max_us"] / 1000 }' |
		while IFS=$'\t' read -r ranks med max; do
			rec_sample bp_death "bananaphone" nproxy "" "$ranks" 1 "$med" "$max"
		done
	rec_note bp_death "One round of $kills kills per rank count; no baseline (the bound is 100 ms)."
fi
