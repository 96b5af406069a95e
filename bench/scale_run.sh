#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# scale: setup cost against the job's size, nproxy beside Open MPI in the
# same run.  For each W in SCALE_W (default 2 8 16 32 64 80; QUICK=1: 2 8 16):
#
#   nproxy shm          W ranks on this host (shm), one process each;
#                       W > 64 is past the local bus (64 ranks per host): no row
#   nproxy tcp;ofi_rxm  W ranks over H = max(2, ceil(W/8)) network-namespace
#                       hosts on a bridge (10.83.0.0/24, root only), W/H a host
#   Open MPI shm        mpirun --allow-run-as-root --oversubscribe -np W,
#                       --mca pml ob1 --mca btl self,vader
#   Open MPI tcp        the same with --mca btl self,tcp over lo (Open MPI
#                       cannot be started inside our namespaces: one host)
#
# Each rank is bench/scale_rank (nproxy_rank_open + the first 4 KiB-per-rank
# allgather) or bench/scale_mpi (MPI_Init + the first MPI_Allgather) and
# prints its own figures; a row is the median over the job's ranks (p99
# column: the slowest rank).  Tables: setup (process start to open/MPI_Init
# done), first allgather, open descriptors and VmRSS per rank after it.
# Ratios: nproxy shm / Open MPI shm, nproxy tcp / Open MPI tcp.
#
# Run time: one job per row and W (no rounds: 80 processes on 2 cpus are
# the measurement's own noise); about 4 minutes on 2 busy cpus, QUICK=1
# about 1 minute.  Without root (namespaces) the tcp rows are skipped,
# without mpirun the Open MPI rows, each saying so.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${NPROXY_TOP:-$(cd "$here/../.." 2>/dev/null && pwd)}
[[ -f $top/bench/record.sh ]] || top=$(cd "$here/.." && pwd)
b=${BENCH_BIN:-$top/build/bench}
. "$top/bench/record.sh"
QUICK=${QUICK:-0}
if [[ -n ${SCALE_W:-} ]]; then
	read -r -a ws <<<"$SCALE_W"
elif [[ $QUICK == 1 ]]; then
	ws=(2 8 16)
else
	ws=(2 8 16 32 64 80)
fi
PER_HOST=8
TMO=${SCALE_TIMEOUT_S:-300}
tmp=$(mktemp -d)
nsp=npx-bs-$$
need=0	# namespace hosts made (ns_setup runs in a subshell: every one is tried)
cleanup() {
	local h
	for ((h = 0; h < need; h++)); do ip netns del "$nsp-$h" 2>/dev/null; done
	ip netns del "$nsp-sw" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

for bin in scale_rank; do
	[[ -x $b/$bin ]] || { echo "scale: $b/$bin not built (make)"; exit 1; }
done
have_mpi=1 mpi_note=
if ! command -v mpirun >/dev/null; then
	have_mpi=0 mpi_note="no mpirun (openmpi-bin)"
elif [[ ! -x $b/scale_mpi ]]; then
	have_mpi=0 mpi_note="scale_mpi not built (needs mpicc)"
fi

hosts_for() { local h=$((($1 + PER_HOST - 1) / PER_HOST)); echo $((h < 2 ? 2 : h)); }

# Namespaces for the largest W, made once.
have_ns=1 ns_note=
for w in "${ws[@]}"; do h=$(hosts_for "$w"); ((h > need)) && need=$h; done
ns_setup() {
	local h ns
	ip netns add "$nsp-sw" && ip -n "$nsp-sw" link add br0 type bridge &&
		ip -n "$nsp-sw" link set br0 up || return 1
	for ((h = 0; h < need; h++)); do
		ns=$nsp-$h
		ip netns add "$ns" &&
			ip link add "bs$h-$$" netns "$ns" type veth peer name "p$h" netns "$nsp-sw" &&
			ip -n "$ns" link set "bs$h-$$" name eth0 &&
			ip -n "$nsp-sw" link set "p$h" master br0 && ip -n "$nsp-sw" link set "p$h" up &&
			ip -n "$ns" addr add "10.83.0.$((h + 1))/24" dev eth0 &&
			ip -n "$ns" link set lo up && ip -n "$ns" link set eth0 up || return 1
	done
}
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
	have_ns=0 ns_note="needs root and ip(8) for the namespace hosts"
elif ! err=$(ns_setup 2>&1); then
	have_ns=0 ns_note="cannot make $need namespaces: $err"
fi

# run_nproxy W HOSTS OUT: HOSTS=0: every rank here on shm.
run_nproxy() {
	local w=$1 hosts=$2 out=$3 r per pids=() rc=0 port=$((21000 + RANDOM % 20000))
	per=$w
	((hosts)) && per=$(((w + hosts - 1) / hosts))
	: >"$out"
	for ((r = 0; r < w; r++)); do
		if ((hosts)); then
			ip netns exec "$nsp-$((r / per))" env FI_PROVIDER="tcp;ofi_rxm" FI_TCP_IFACE=eth0 \
				NPROXY_ROOT_COMM_ID="10.83.0.1:$port" NPROXY_HANDSHAKE=memfd \
				timeout -k 5 "$TMO" "$b/scale_rank" "$r" "$w" $((r % per)) \
				$((w - r / per * per < per ? w - r / per * per : per)) "bs-$$-$w" \
				>>"$out" 2>>"$out.err" &
		else
			env FI_PROVIDER=shm NPROXY_HANDSHAKE=memfd timeout -k 5 "$TMO" "$b/scale_rank" \
				"$r" "$w" "$r" "$w" "bs-$$-$w" >>"$out" 2>>"$out.err" &
		fi
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	((rc == 0)) && (($(grep -c '^RESULT' "$out") == w))
}

# run_mpi W BTL OUT
run_mpi() {
	local w=$1 btl=$2 out=$3 extra=()
	[[ $btl == tcp ]] && extra=(--mca btl_tcp_if_include lo)
	timeout -k 10 "$TMO" mpirun --allow-run-as-root --oversubscribe -np "$w" --mca pml ob1 \
		--mca btl "self,$btl" "${extra[@]}" "$b/scale_mpi" >"$out" 2>"$out.err" &&
		(($(grep -c '^RESULT' "$out") == w))
}

rec_table scale_setup "Setup per rank: process start to rank open (nproxy) / MPI_Init done" \
	"ranks (W)" "ms (median over ranks; p99 = slowest)" lower category
rec_table scale_first "First 4 KiB-per-rank allgather, start to end" \
	"ranks (W)" "ms (median over ranks; p99 = slowest)" lower category
rec_table scale_fds "Open descriptors per rank after the first allgather" \
	"ranks (W)" "descriptors (median over ranks)" lower category
rec_table scale_rss "Resident memory per rank after the first allgather" \
	"ranks (W)" "VmRSS MiB (median over ranks)" lower category

# record SERIES ROLE PAIR W FILE: the job's median and max of each field.
record() {
	local series=$1 role=$2 pair=$3 w=$4 f=$5 fld id mult
	for fld in setup_ms first_ms fds rss_kib; do
		case $fld in
		setup_ms) id=scale_setup mult=1 ;;
		first_ms) id=scale_first mult=1 ;;
		fds) id=scale_fds mult=1 ;;
		rss_kib) id=scale_rss mult=0.0009765625 ;;
		esac
		read -r med max < <(sed -n "s/.* $fld=\([0-9.-]*\).*/\1/p" "$f" | sort -g |
			awk -v m=$mult '{ v[NR] = $1 * m } END { if (!NR) exit
				printf "%.2f %.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR] }')
		[[ -n ${med:-} ]] && rec_sample "$id" "$series" "$role" "$pair" "$w" 1 "$med" "$max"
		printf "  %-34s W=%-3s %-9s median %10s  slowest %10s\n" "$series" "$w" "${fld/rss_kib/rss_mib}" "${med:-n/a}" "${max:-n/a}"
	done
}

failed=0
tcp_series="nproxy tcp;ofi_rxm (max(2, W/8) netns hosts)"
for w in "${ws[@]}"; do
	echo "# W=$w"
	if ((w <= 64)); then
		if run_nproxy "$w" 0 "$tmp/np-shm.$w"; then
			record "nproxy shm (one host)" nproxy shm "$w" "$tmp/np-shm.$w"
		else
			echo "scale: nproxy shm W=$w failed: $(tail -n 2 "$tmp/np-shm.$w.err")"
			failed=1
		fi
	fi
	if ((have_ns)); then
		if run_nproxy "$w" "$(hosts_for "$w")" "$tmp/np-tcp.$w"; then
			record "$tcp_series" nproxy tcp "$w" "$tmp/np-tcp.$w"
		else
			echo "scale: nproxy tcp W=$w failed: $(tail -n 2 "$tmp/np-tcp.$w.err")"
			failed=1
		fi
	fi
	if ((have_mpi)); then
		for btl in vader tcp; do
			pair=shm
			[[ $btl == tcp ]] && pair=tcp
			if run_mpi "$w" $btl "$tmp/mpi-$btl.$w"; then
				record "Open MPI btl $btl (one host)" baseline $pair "$w" "$tmp/mpi-$btl.$w"
			else
				echo "scale: Open MPI btl $btl W=$w failed: $(tail -n 2 "$tmp/mpi-$btl.$w.err")"
				failed=1
			fi
		done
	fi
done
((have_ns)) || rec_note scale_setup "tcp rows skipped: $ns_note"
((have_mpi)) || rec_note scale_setup "Open MPI rows skipped: $mpi_note"
rec_note scale_setup "One job per row and W. setup = /proc/self/stat start time (10 ms resolution) to nproxy_rank_open()+nproxy_coll_open() returned (nproxy: bus, libfabric engine with its connections to r +- 2^k, handshake region, proxy comm) or to MPI_Init returned (Open MPI: connections made lazily, in the first collective). The loader and library constructors are inside it (libfabric's libinfinipath dependency calibrates its timer at load, in every process that links libfabric). Ratio: nproxy shm / Open MPI vader, nproxy tcp (max(2, W/8) namespace hosts, W/hosts ranks each) / Open MPI tcp over lo. W=80 has no shm row: 64 ranks per host is the local bus's limit."
rec_note scale_rss "VmRSS after the first allgather; a tcp;ofi_rxm rank's is mostly libfabric's (Documentation/net.md, Resident memory)."
exit $failed
