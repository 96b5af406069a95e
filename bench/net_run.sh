#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# net_run.sh: nproxy's network path vs fi_pingpong, same provider, same
# sizes, same iteration counts, in one run (this box is noisy: compare the
# ratios, not the absolute numbers).  One table:
#
#   provider  bytes  fi_pingpong usec/xfer | nproxy proxy-path usec (ratio) |
#   engine-only usec (ratio) | MB/sec of each and ratios
#
# usec/xfer is one-way latency (time / 2 iters), MB/sec = 2 iters * size /
# time, both as fi_pingpong computes them.  Latency ratio = nproxy /
# fi_pingpong (lower is better, target <= 1.10 for small messages on shm);
# bandwidth ratio = nproxy / fi_pingpong (target >= 0.95 at 1 MiB on shm).
#
#   bench/net_run.sh [providers...]     default: shm "tcp;ofi_rxm" "udp;ofi_rxd"
# QUICK=1: three sizes (64 B, 64 KiB, 1 MiB).  ROUNDS (default 1):
# rounds of fi_pingpong, proxy path, engine, interleaved per provider; the
# table shows the last round.  fi_pingpong's server and client run pinned
# to two different CPUs; a figure that still looks starved (see
# starved_baseline) is printed and flagged in the report.  A round taken
# under heavy steal is run once more (bench/record.sh, steal_round).  Under bench/run (BENCH_RECORDS set) every
# round's figures go to the report (bench/record.sh).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=${NPROXY_TOP:-$(cd "$here/.." && pwd)}
bin=${NPROXY_BUILD:-$top/build}/bench/net_pingpong
[[ -x $bin ]] || bin=$here/net_pingpong
command -v fi_pingpong >/dev/null || { echo "net_run.sh: fi_pingpong missing (libfabric-bin)"; exit 0; }
[[ -x $bin ]] || { echo "net_run.sh: net_pingpong not built (make -C bench)"; exit 1; }

sizes=(64 256 1024 4096 16384 65536 262144 1048576 4194304)
[[ ${QUICK:-0} == 1 ]] && sizes=(64 65536 1048576)
ROUNDS=${ROUNDS:-1}
. "$here/record.sh"
providers=("$@")
((${#providers[@]})) || providers=(shm "tcp;ofi_rxm" "udp;ofi_rxd")
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
# nproxy's engine turns shm's CMA off where a CMA read costs over 1.6 times a
# memcpy (lib/net/net_shm_copy.c); fi_pingpong gets the same protocol, so
# the ratio compares the engines, not the protocols.
np_run=${NPROXY_BUILD:-$top/build}/bin/nproxy-run
shm_copy=$(nproxy_shm_copy "$np_run")
[[ $shm_copy == "CMA off"* && -z ${FI_SHM_DISABLE_CMA:-} ]] && export FI_SHM_DISABLE_CMA=1
echo "# shm large messages: ${shm_copy:-?} (fi_pingpong and net_pingpong alike)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Bytes per direction per size, MiB: udp;ofi_rxd moves a few MB/s on this
# box (one CPU segments, acks and retransmits), so 512 MiB would take minutes
# per size; both fi_pingpong and net_pingpong get the same budget.
budget_mib() { [[ $1 == *ofi_rxd* ]] && echo 16 || echo 512; }

iters_for() {	# same formula as net_pingpong: <= budget per direction, 20..2000
	local n=$((($(budget_mib "$2") << 20) / $1))
	((n > 2000)) && n=2000
	((n < 20)) && n=20
	echo $n
}

# fi_pingpong busy-polls its completion queue in both processes: on a
# small machine two pollers sharing one CPU take turns a time slice at a
# time and the "latency" is the scheduler's.  Pin server and client to two
# different CPUs this process may use; with fewer than two there is no fair
# placement and every fi_pingpong figure is flagged in the report.
mapfile -t cpus < <(python3 -c 'import os; print("\n".join(map(str, sorted(os.sched_getaffinity(0)))))' 2>/dev/null)
if ((${#cpus[@]} >= 2)) && command -v taskset >/dev/null; then
	pin_srv=(taskset -c "${cpus[0]}") pin_cli=(taskset -c "${cpus[1]}")
	pinning="fi_pingpong server on CPU ${cpus[0]}, client on CPU ${cpus[1]} (taskset)"
else
	pin_srv=() pin_cli=()
	pinning="fi_pingpong not pinned (${#cpus[@]} usable CPU(s) or no taskset): its figures are flagged"
fi
rec_meta net_pinning "$pinning"

# fi_pingpong PROVIDER SIZE -> "usec MBps" (client side)
fi_pp() {
	local prov=$1 size=$2 iters port out
	iters=$(iters_for "$size" "$prov")
	port=$((30000 + RANDOM % 20000))
	timeout 120 "${pin_srv[@]}" fi_pingpong -p "$prov" -e rdm -I "$iters" -S "$size" -B "$port" \
		>"$tmp/srv" 2>&1 &
	local spid=$!
	for try in 1 2 3 4 5 6 7 8 9 10; do	# the server may be slow to listen
		if ((try == 1)); then sleep 0.1; else sleep 0.3; fi
		out=$(timeout 120 "${pin_cli[@]}" fi_pingpong -p "$prov" -e rdm -I "$iters" -S "$size" \
			-P "$port" 127.0.0.1 2>&1) && break
	done
	kill "$spid" 2>/dev/null
	wait $spid 2>/dev/null
	# bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	# (sizes print as 64, 1k, 4m: fabtests' size_str)
	awk -v s="$size" '
		$1 ~ /^[0-9]+[kmg]?$/ {
			n = $1 + 0
			if ($1 ~ /k$/) n *= 1024
			if ($1 ~ /m$/) n *= 1048576
			if ($1 ~ /g$/) n *= 1073741824
			if (n == s) { print $7, $6; found = 1 }
		}
		END { if (!found) print "nan nan" }' <<<"$out"
}

# nproxy MODE PROVIDER -> lines "size usec MBps"
np_pp() {
	FI_PROVIDER=$2 timeout 600 "$bin" --mode "$1" --sizes "$(IFS=,; echo "${sizes[*]}")" \
		--budget-mib "$(budget_mib "$2")" 2>"$tmp/np.err" |
		awk '$1 ~ /^[0-9]+$/ { print $1, $2, $3 }'
}

# starved_baseline: reads "size fi_usec engine_usec" lines (ascending size)
# and prints "size reason" for each fi_pingpong figure that cannot be a
# fair ping-pong: slower than twice its own figure at a larger size (a
# ping-pong's latency grows with the size), or more than 10x nproxy's
# engine alone on the same provider (the same libfabric calls, with no
# proxy on top).  Either means the pair was waiting for a CPU.
starved_baseline() {
	awk '{ s[NR] = $1; f[NR] = $2; e[NR] = $3 }
	END {
		for (i = 1; i <= NR; i++) {
			if (f[i] !~ /^[0-9.]+$/) continue
			why = ""
			for (j = i + 1; j <= NR; j++)
				if (f[j] ~ /^[0-9.]+$/ && f[i] > 2 * f[j]) {
					why = sprintf("%s us at %s B > 2 x %s us at %s B", f[i], s[i], f[j], s[j]); break
				}
			if (why == "" && e[i] ~ /^[0-9.]+$/ && e[i] > 0 && f[i] > 10 * e[i])
				why = sprintf("%s us > 10 x the engine alone (%s us)", f[i], e[i])
			if (why != "") print s[i], "starved baseline: " why
		}
	}'
}

# measure PROVIDER: one round -- fi_pingpong at every size, then the proxy
# path, then the engine alone -- into $tmp (nothing recorded yet: a round
# refused for heavy steal runs again).
measure() {
	local prov=$1 size
	for size in "${sizes[@]}"; do
		fi_pp "$prov" "$size" >"$tmp/fi.$size"
	done
	np_pp proxy "$prov" >"$tmp/proxy"
	np_pp engine "$prov" >"$tmp/engine"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b; else printf "n/a" }'; }

printf '%-12s %8s | %10s %10s %6s %10s %6s | %10s %10s %6s %10s %6s\n' \
	provider bytes fi_usec proxy_usec ratio engine_usec ratio fi_MB/s proxy_MB/s ratio engine_MB/s ratio
for prov in "${providers[@]}"; do
	id=net_lat_${prov//[^a-z]/_}
	rec_table "$id" "One-way latency vs size, provider $prov: proxy path, engine alone, fi_pingpong" \
		"message size (bytes)" "one-way latency (us, time / 2 iterations)" lower log
	rec_table "${id/lat/bw}" "Bandwidth vs size, provider $prov: proxy path, engine alone, fi_pingpong" \
		"message size (bytes)" "MB/s (2 x iterations x size / time)" higher log
	rec_note "$id" "Per round: fi_pingpong at every size, then net_pingpong --mode proxy, then --mode engine; same provider, sizes and iteration counts (<= $(budget_mib "$prov") MiB per direction, 20..2000). Ratio = nproxy / fi_pingpong (target: <= 1.10 for small messages on shm)."
	rec_note "$id" "fi_pingpong placement: $pinning. A fi_pingpong figure more than twice its own at a larger size, or more than 10x the engine alone, is flagged as a starved baseline (its ratio then says more about the CPUs than about nproxy)."
	for ((r = 1; r <= ROUNDS; r++)); do
		steal_round "net $prov round $r" measure "$prov"
		: >"$tmp/starved"
		for size in "${sizes[@]}"; do
			read -r fu _ <"$tmp/fi.$size"
			printf '%s %s %s\n' "$size" "$fu" \
				"$(awk -v s="$size" '$1 == s { print $2 }' "$tmp/engine")"
		done | starved_baseline >"$tmp/starved"
		if ((${#pin_srv[@]} == 0)); then
			for size in "${sizes[@]}"; do
				grep -q "^$size " "$tmp/starved" ||
					echo "$size starved baseline: client and server not on separate CPUs" >>"$tmp/starved"
			done
		fi
		while read -r size why; do
			rec_flag "$id" fi_pingpong "$size" "$r" "$why"
			rec_flag "${id/lat/bw}" fi_pingpong "$size" "$r" "$why"
			((r == ROUNDS)) && echo "# $prov $size B: fi_pingpong $why"
		done <"$tmp/starved"
		for size in "${sizes[@]}"; do
			read -r fu fb <"$tmp/fi.$size"
			read -r _ pu pb < <(awk -v s="$size" '$1 == s' "$tmp/proxy")
			read -r _ eu eb < <(awk -v s="$size" '$1 == s' "$tmp/engine")
			((r == ROUNDS)) && printf '%-12s %8s | %10s %10s %6s %10s %6s | %10s %10s %6s %10s %6s\n' \
				"$prov" "$size" "$fu" "${pu:-n/a}" "$(ratio "${pu:-0}" "$fu")" \
				"${eu:-n/a}" "$(ratio "${eu:-0}" "$fu")" "$fb" "${pb:-n/a}" \
				"$(ratio "${pb:-0}" "$fb")" "${eb:-n/a}" "$(ratio "${eb:-0}" "$fb")"
			rec_sample "$id" fi_pingpong baseline "" "$size" "$r" "$fu"
			rec_sample "$id" "nproxy proxy path" nproxy "" "$size" "$r" "${pu:-nan}"
			rec_sample "$id" "nproxy engine alone" nproxy "" "$size" "$r" "${eu:-nan}"
			rec_sample "${id/lat/bw}" fi_pingpong baseline "" "$size" "$r" "$fb"
			rec_sample "${id/lat/bw}" "nproxy proxy path" nproxy "" "$size" "$r" "${pb:-nan}"
			rec_sample "${id/lat/bw}" "nproxy engine alone" nproxy "" "$size" "$r" "${eb:-nan}"
			unset pu pb eu eb
		done
	done
done
echo "# $pinning"
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
