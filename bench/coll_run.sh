#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# coll_run.sh: the whole path, end to end -- nproxy-run's allgather and
# allreduce (Bananaphone, handshake regions, proxy workers, libfabric) against
# Open MPI doing the same collective (bench/coll_mpi.mpi.c) on this host, in
# one run, baselines interleaved (MPI, nproxy, MPI, nproxy: load drifts on
# a shared host, so read the ratios, not the absolute numbers).
#
#  1. Ranks 2 and 4, allgather and allreduce, sizes 1K 64K 1M 4M 16M (size =
#     the whole result buffer, each rank contributes size/P; allreduce of
#     size/4 uint32 with MPI_SUM), nproxy-run at device delay 0 and at its
#     default device delay (asked from nproxy-run itself); MPI has no device,
#     so at a device delay D its figures are MPI's own + D (the device's
#     step, once per collective): the ratio compares like with like.  Both
#     write their input afresh and poison the result before every iteration
#     and check it after with memcmp, outside the timing (coll_mpi.mpi.c
#     says why: a warm, clean input copies about twice as fast, and a check
#     that computes every value slows the next op).  An iteration's time is
#     the slowest rank's, barrier before each iteration outside the timing;
#     median and p99 (nearest rank: with fewer than 100 iterations p99 is the
#     maximum); busbw as nccl-tests; ratio = nproxy median / MPI median
#     (lower is better, < 1: nproxy faster); CPU per op = CPU time of every
#     process of the job (all threads) during the timed operations / timed
#     operations: from nproxy-run's cpu_s when its --json has it, else n/a.
#  2. CPU while waiting on the device: a 2-rank job whose emulated device
#     takes 200 ms to reach the network stage, CPU seconds per wall second.
#  3. The project's targets, met or missed per row.
#
#   bench/coll_run.sh            full: 2 rounds, ITERS=40 timed iterations per size
#   QUICK=1 bench/coll_run.sh    1 round, ITERS=10, sizes up to 4M (well under a minute)
# Under bench/run (BENCH_RECORDS set, bench/record.sh) it also records every
# per-round figure for the report: latency and bus bandwidth per collective,
# nproxy-run (each device delay) and Open MPI (+ that delay), paired by rank
# count and delay.  A round (MPI, then nproxy-run at each delay) taken under
# heavy steal is run once more (bench/record.sh, steal_round).
# Environment: ITERS, WARMUP, ROUNDS override the above; MPI_BIND=core|none|
# socket forces mpirun's --bind-to (default: Open MPI's own policy, printed);
# MPI_SINGLE_COPY=same|cma|none: vader's btl_vader_single_copy_mechanism
# (default same: what nproxy-run's shm uses here, from its "shm_copy" --
# nproxy switches CMA off where a CMA read costs over 1.6 times a memcpy, and
# Open MPI gains from the same switch, so like is compared with like);
# NPROXY_BUILD: build tree (default <top>/build); NPROXY_RUN: the nproxy-run to
# measure (default $NPROXY_BUILD/bin/nproxy-run); RUN_TIMEOUT: seconds per
# nproxy-run / mpirun call (default 300).  Works from any directory, from the
# source tree or from its copy in build/bench/.  Exit status: 0 when every
# run succeeded (targets never fail it), 1 when a run failed or timed out.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
if [[ -f $here/../tools/nproxy-run.c ]]; then top=$(cd "$here/.." && pwd -P); else top=$(cd "$here/../.." && pwd -P); fi
build=${NPROXY_BUILD:-$top/build}
nprun=${NPROXY_RUN:-$build/bin/nproxy-run}
mpibin=$build/bench/coll_mpi
[[ -x $mpibin ]] || mpibin=$here/coll_mpi

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	ITERS=${ITERS:-10} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-1}
else
	ITERS=${ITERS:-40} WARMUP=${WARMUP:-5} ROUNDS=${ROUNDS:-2}
fi
TMO=${RUN_TIMEOUT:-300}
RANKS=(2 4)
COLLS=(allgather allreduce)
SIZES=1K,64K,1M,4M,16M
[[ $QUICK == 1 ]] && SIZES=${COLL_SIZES:-1K,64K,1M,4M}
WAIT_DELAY_US=200000	# section 2: the "device takes 200 ms" job

[[ -x $nprun ]] || { echo "coll_run: $nprun missing (make -j2 all)" >&2; exit 1; }
. "$here/record.sh"	# steal_round; records only under bench/run (BENCH_RECORDS)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rec=$tmp/records	# one line per (run, size): see add_np / add_mpi
: >"$rec"
failed=0

# ---- helpers ---------------------------------------------------------------

# fail_run WHAT ERRFILE RC: report a failed run with the head of its stderr.
fail_run() {
	local what=$1 err=$2 rc=$3
	failed=$((failed + 1))
	if ((rc == 124 || rc == 137)); then
		echo "coll_run: FAILED: $what: timed out after ${TMO} s" >&2
	else
		echo "coll_run: FAILED: $what: exit $rc" >&2
	fi
	grep -v 'MCW rank' "$err" | head -n 8 | sed 's/^/coll_run:   | /' >&2
}

# The one place that knows nproxy-run --json's field names: get(d, name)
# takes the name this script uses and tries the spellings nproxy-run has
# had (or may get: fields carrying their units), first found wins.
py_np_fields='
NP_FIELDS = {
    "median_us": ("median_us", "median_usec", "lat_median_us"),
    "p99_us": ("p99_us", "p99_usec", "lat_p99_us"),
    "cpu_s": ("cpu_s", "cpu_sec", "cpu_seconds"),
    "timed_wall_s": ("timed_wall_s", "timed_wall_sec", "wall_s"),
    "device_delay_us": ("device_delay_us", "device_delay_usec"),
    "bytes": ("bytes", "size_bytes", "size"),
    "iters": ("iters", "iterations"),
}
def get(d, name, default=None):
    for k in NP_FIELDS.get(name, (name,)):
        if k in d:
            return d[k]
    return default
'

# nproxy-run's JSON -> records "np RANKS COLL DELAY ROUND IDX BYTES ITERS MED P99 CPU WALL";
# prints "error: ..." (and nothing else) when the JSON is unusable.
py_np=$py_np_fields'
import json, sys
f, ranks, coll, delay, rnd = sys.argv[1:6]
try:
    d = json.load(open(f))
except Exception as e:
    print("error: no JSON from nproxy-run (%s)" % e); sys.exit(0)
if d.get("status") != "ok":
    print("error: status %s: %s" % (d.get("status"), d.get("error"))); sys.exit(0)
for i, r in enumerate(d.get("results", [])):
    if not r.get("verified", False):
        print("error: %s B not verified" % r.get("bytes")); sys.exit(0)
    cpu = get(r, "cpu_s"); wall = get(r, "timed_wall_s")
    print("np", ranks, coll, delay, rnd, i, get(r, "bytes"), get(r, "iters"), get(r, "median_us"),
          get(r, "p99_us"), "nan" if cpu is None else cpu, "nan" if wall is None else wall)
'

# run_np RANKS COLL DELAY ROUND
run_np() {
	local p=$1 c=$2 d=$3 r=$4 rc out
	out=$tmp/np.$p.$c.$d.$r
	timeout -k 10 "$TMO" "$nprun" -q -p "$p" -c "$c" --device-delay-us "$d" -n "$ITERS" \
		-w "$WARMUP" -s "$SIZES" --json >"$out.json" 2>"$out.err"
	rc=$?
	python3 -c "$py_np" "$out.json" "$p" "$c" "$d" "$r" >"$out.rec"
	if ((rc)) || grep -q '^error: ' "$out.rec"; then
		grep '^error: ' "$out.rec" >>"$out.err"
		fail_run "nproxy-run -p $p -c $c --device-delay-us $d (round $r)" "$out.err" "$rc"
		echo "np $p $c $d $r FAILED" >>"$rec"
		return
	fi
	cat "$out.rec" >>"$rec"
	[[ -s $tmp/np.meta ]] || python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%s (provider %s, handshake %s)" % (d.get("version"), d.get("provider"), d.get("handshake")))
' "$out.json" >"$tmp/np.meta" 2>/dev/null
}

# run_mpi RANKS COLL ROUND
have_mpi=1
mpi_note=""
if ! command -v mpirun >/dev/null; then
	have_mpi=0 mpi_note="MPI: n/a (no mpirun: install openmpi-bin libopenmpi-dev)"
elif [[ ! -x $mpibin ]]; then
	have_mpi=0 mpi_note="MPI: n/a (coll_mpi not built: make -C bench, which needs mpicc)"
fi
mpi_bind_args=()
[[ -n ${MPI_BIND:-} ]] && mpi_bind_args=(--bind-to "$MPI_BIND")
# vader's single copy: the same as nproxy's shm unless MPI_SINGLE_COPY says.
mpi_copy=${MPI_SINGLE_COPY:-same}
np_copy=$(nproxy_shm_copy "$nprun")
if [[ $mpi_copy == same ]]; then
	mpi_copy=cma
	[[ $np_copy == "CMA off"* ]] && mpi_copy=none
	mpi_copy_why="same as nproxy's shm: $np_copy"
else
	mpi_copy_why="MPI_SINGLE_COPY; nproxy's shm: $np_copy"
fi
mpi_bind_args+=(--mca btl_vader_single_copy_mechanism "$mpi_copy")
run_mpi() {
	local p=$1 c=$2 r=$3 rc out
	out=$tmp/mpi.$p.$c.$r
	timeout -k 10 "$TMO" mpirun --allow-run-as-root --oversubscribe --mca btl self,vader \
		"${mpi_bind_args[@]}" --report-bindings -np "$p" \
		"$mpibin" -c "$c" -n "$ITERS" -w "$WARMUP" -s "$SIZES" >"$out.out" 2>"$out.err"
	rc=$?
	# Where the ranks ran (from --report-bindings, once per rank count).
	if [[ ! -s $tmp/bind.$p ]]; then
		awk '/MCW rank/ {
			n++
			if (/not bound/) u++
			else if (/\[core [0-9]+\[hwt [0-9]+\]\]:/ && !/core [0-9]+\[hwt [0-9]+\], *core/) c++
			else o++
		} END {
			if (!n) exit
			if (c == n) { print "every rank bound to one core"; exit }
			if (u == n) { print "no rank bound"; exit }
			print c + 0 " of " n " ranks bound to one core, " o + 0 " to several CPUs, " u + 0 " not bound"
		}' "$out.err" >"$tmp/bind.$p"
	fi
	if ((rc)) || ! grep -q '^RESULT' "$out.out"; then
		fail_run "mpirun -np $p coll_mpi -c $c (round $r)" "$out.err" "$rc"
		echo "mpi $p $c - $r FAILED" >>"$rec"
		return
	fi
	awk -v p="$p" -v c="$c" -v r="$r" '/^RESULT/ {
		delete f
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		print "mpi", p, c, "-", r, idx++, f["bytes"], f["iters"], f["median_us"],
			f["p99_us"], f["cpu_s"], f["wall_s"]
	}' "$out.out" >>"$rec"
}

# ---- nproxy-run's default device delay and a smoke test ---------------------

def_delay=$(timeout -k 10 "$TMO" "$nprun" -q -p 2 -n 1 -w 0 -s 1K --json 2>"$tmp/probe.err" |
	python3 -c "$py_np_fields"'
import json, sys
print(int(get(json.load(sys.stdin), "device_delay_us")))' 2>/dev/null)
if [[ -z $def_delay ]]; then
	# Not from a run: from --help's "(default N)".
	def_delay=$("$nprun" --help 2>/dev/null | sed -n 's/.*--device-delay-us.*(default \([0-9]*\)).*/\1/p')
	echo "coll_run: nproxy-run probe run failed; default device delay from --help: ${def_delay:-unknown}" >&2
	head -n 5 "$tmp/probe.err" | sed 's/^/coll_run:   | /' >&2
fi
DELAYS=(0)
[[ -n $def_delay && $def_delay != 0 ]] && DELAYS+=("$def_delay")

# How nproxy-run places its forked processes (it has --bind core|none or nothing).
np_bind=$("$nprun" --help 2>/dev/null | grep -A1 -- '--bind' | paste -sd' ' |
	sed -n 's/.*(default \([a-z]*\).*/\1/p')
case $np_bind in
"") np_bind="not bound (this nproxy-run has no --bind)" ;;
core) np_bind="--bind core, its default: process i on the i-th allowed CPU" ;;
*) np_bind="--bind $np_bind, its default" ;;
esac

# ---- 1. the table -------------------------------------------------------------

start=$(date +%s)
echo "# coll_run: $ROUNDS round(s), $ITERS timed iterations after $WARMUP warm-up per size, sizes $SIZES," \
	"device delay ${DELAYS[*]} us; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
# coll_round RANKS COLL ROUND: MPI then nproxy-run at each delay; drops what
# an earlier attempt of the same round recorded (steal_round re-runs a round
# taken under heavy steal).
coll_round() {
	local p=$1 c=$2 r=$3 d
	awk -v p="$p" -v c="$c" -v r="$r" '!($2 == p && $3 == c && $5 == r)' "$rec" >"$rec.keep"
	mv "$rec.keep" "$rec"
	((have_mpi)) && run_mpi "$p" "$c" "$r"
	for d in "${DELAYS[@]}"; do
		run_np "$p" "$c" "$d" "$r"
	done
	return 0
}
for p in "${RANKS[@]}"; do
	for c in "${COLLS[@]}"; do
		for ((r = 1; r <= ROUNDS; r++)); do
			steal_round "coll $p ranks $c round $r" coll_round "$p" "$c" "$r"
		done
	done
done

# ---- 2. CPU while waiting on the device ---------------------------------------

w=$tmp/wait
timeout -k 10 "$TMO" "$nprun" -q -p 2 -n 10 -w 1 --device-delay-us "$WAIT_DELAY_US" -s 1K --json \
	>"$w.json" 2>"$w.err"
rc=$?
wait_line=$(python3 -c "$py_np_fields"'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("error: no JSON from nproxy-run (%s)" % e); sys.exit(0)
if d.get("status") != "ok" or not d.get("results"):
    print("error: status %s: %s" % (d.get("status"), d.get("error"))); sys.exit(0)
r = d["results"][0]
cpu, wall = get(r, "cpu_s"), get(r, "timed_wall_s")
if cpu is None or wall is None or not wall > 0:
    print("n/a"); sys.exit(0)
print(cpu, wall, get(r, "iters"), d.get("procs", 2))
' "$w.json")
if ((rc)) || [[ $wait_line == error:* ]]; then
	[[ $wait_line == error:* ]] && echo "$wait_line" >>"$w.err"
	fail_run "nproxy-run -p 2 --device-delay-us $WAIT_DELAY_US (CPU while waiting)" "$w.err" "$rc"
	wait_line=FAILED
fi

# ---- render -----------------------------------------------------------------

export COLL_SIZES=$SIZES COLL_ROUNDS=$ROUNDS COLL_DELAYS="${DELAYS[*]}" COLL_WAIT="$wait_line"
export COLL_WAIT_DELAY=$WAIT_DELAY_US COLL_MPI_NOTE=$mpi_note COLL_HAVE_MPI=$have_mpi
python3 - "$rec" <<'EOF'
import math, os, statistics, sys

recs = [l.split() for l in open(sys.argv[1]) if l.strip()]
sizes = os.environ["COLL_SIZES"].split(",")
rounds = int(os.environ["COLL_ROUNDS"])
delays = os.environ["COLL_DELAYS"].split()
have_mpi = os.environ["COLL_HAVE_MPI"] == "1"

failed = set()      # (impl, ranks, coll, delay)
runs = {}           # (impl, ranks, coll, delay, idx) -> [(bytes, iters, med, p99, cpu, wall)]
for r in recs:
    impl, p, c, d, rnd = r[:5]
    if r[5] == "FAILED":
        failed.add((impl, p, c, d))
        continue
    runs.setdefault((impl, p, c, d, int(r[5])), []).append(
        (int(r[6]), int(r[7]), float(r[8]), float(r[9]), float(r[10]), float(r[11])))

def label(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return "%dM" % (b >> 20)
    if b >= 1024 and b % 1024 == 0:
        return "%dK" % (b >> 10)
    return str(b)

def agg(impl, p, c, d, i, add_us=0.0):
    """median over rounds of the medians and of the p99s, CPU s per op, spread, bytes;
    add_us: a device delay added to every MPI figure (MPI has no device)"""
    if (impl, p, c, d) in failed:
        return "FAILED"
    v = runs.get((impl, p, c, d, i))
    if not v:
        return "FAILED" if impl == "np" or have_mpi else None
    v = [(x[0], x[1], x[2] + add_us, x[3] + add_us, x[4], x[5]) for x in v]
    meds = [x[2] for x in v]
    cpu = sum(x[4] for x in v)
    iters = sum(x[1] for x in v)
    cpu_op = cpu / iters if iters and not math.isnan(cpu) else float("nan")
    return dict(bytes=v[0][0], med=statistics.median(meds), p99=statistics.median(x[3] for x in v),
                lo=min(meds), hi=max(meds), cpu_op=cpu_op, n=len(v))

def busbw(c, p, b, med):
    f = (p - 1) / p * (2 if c == "allreduce" else 1)
    return b / (med * 1e-6) / 1e9 * f

# (aim, must) ratio bounds (Documentation/development.md), per rank count
# and size; None: no bound
def targets(p, b):
    if b >= 1 << 20:
        return (1.0, 1.2 if p <= 2 else 1.5)
    if b == 64 << 10:
        return (1.5, 2.0) if p <= 2 else (None, 2.5)
    if b == 1 << 10:
        return (4.0, 6.0) if p <= 2 else (None, 8.0)
    return (None, None)

def mark(ratio, bound):
    if bound is None:
        return "-"
    if ratio is None:
        return "<=%gx n/a" % bound
    return "<=%gx %s" % (bound, "met" if ratio <= bound else "MISSED")

def num(x, fmt):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt % x

hdr = ("ranks", "coll", "size", "delay", "np_med", "np_p99", "np_busbw", "mpi_med", "mpi_p99",
       "mpi_busbw", "np/mpi", "np_cpu", "mpi_cpu", "aim", "must")
units = ("", "", "(B)", "(us)", "(us)", "(us)", "(GB/s)", "(us)", "(us)", "(GB/s)", "(median)",
         "(us/op)", "(us/op)", "", "")
fmt = "%5s %-9s %5s %6s | %10s %10s %8s | %10s %10s %8s | %8s | %8s %8s | %-13s %-13s"
print(fmt % hdr)
print(fmt % units)
spread = []
met = {"aim": [0, 0], "must": [0, 0]}
for p in sorted({r[1] for r in recs}, key=int):
    for c in ("allgather", "allreduce"):
        if not any(r[1] == p and r[2] == c for r in recs):
            continue
        for d in delays:
            sp = []
            for i, s in enumerate(sizes):
                n = agg("np", p, c, d, i)
                m = agg("mpi", p, c, "-", i, float(d))
                P = int(p)
                cells = [p, c, s, d]
                if isinstance(n, dict):
                    cells += [num(n["med"], "%.1f"), num(n["p99"], "%.1f"),
                              num(busbw(c, P, n["bytes"], n["med"]), "%.3f")]
                    s = label(n["bytes"])
                    cells[2] = s
                else:
                    cells += [n, "", ""]
                if isinstance(m, dict):
                    cells += [num(m["med"], "%.1f"), num(m["p99"], "%.1f"),
                              num(busbw(c, P, m["bytes"], m["med"]), "%.3f")]
                else:
                    cells += [m or "n/a", "", ""]
                ratio = None
                if isinstance(n, dict) and isinstance(m, dict) and m["med"] > 0:
                    ratio = n["med"] / m["med"]
                    cells.append("%.2f" % ratio)
                else:
                    cells.append("FAILED" if "FAILED" in (n, m) else "n/a")
                cells.append(num(n["cpu_op"] * 1e6, "%.1f") if isinstance(n, dict) else "-")
                cells.append(num(m["cpu_op"] * 1e6, "%.1f") if isinstance(m, dict) else "-")
                b = n["bytes"] if isinstance(n, dict) else (m["bytes"] if isinstance(m, dict) else 0)
                aim, must = targets(int(p), b)
                cells += [mark(ratio, aim), mark(ratio, must)]
                for k, bound in (("aim", aim), ("must", must)):
                    if bound is not None and ratio is not None:
                        met[k][1] += 1
                        met[k][0] += ratio <= bound
                print(fmt % tuple(cells))
                part = s
                if isinstance(n, dict):
                    part += " np %.1f-%.1f" % (n["lo"], n["hi"])
                if isinstance(m, dict):
                    part += " mpi %.1f-%.1f" % (m["lo"], m["hi"])
                sp.append(part)
            spread.append("#   %s ranks %s delay %s us: %s" % (p, c, d, "; ".join(sp)))

print("# np = nproxy-run, mpi = Open MPI (btl self,vader), both on this host in this run.  An iteration's")
print("#   time is the slowest rank's (barrier before it, untimed); med/p99 = nearest-rank quantiles over")
print("#   the iterations (p99 is the maximum below 100 iterations); busbw = size/med x (P-1)/P for")
print("#   allgather, x 2(P-1)/P for allreduce (nccl-tests); np/mpi = ratio of the medians: lower is")
print("#   better, < 1 means nproxy is faster.  MPI has no device: at a device delay D its columns")
print("#   are MPI's own figures + D (one device step per collective), so np/mpi compares like with like.")
print("# cpu = CPU time of all the job's processes (every thread) during the timed operations, per")
print("#   operation; about ranks x med when every rank is busy the whole time.")
if any(math.isnan(x[4]) for k, v in runs.items() if k[0] == "np" for x in v):
    print("#   np_cpu n/a: this nproxy-run's --json has no cpu_s/timed_wall_s.")
if rounds > 1:
    print("# %d rounds per (ranks, collective), interleaved MPI, nproxy, MPI, nproxy, ...; each figure is the" % rounds)
    print("#   median over rounds of the per-round figure (median of 2 = their mean); spread = min-max of the")
    print("#   per-round medians (us):")
    for l in spread:
        print(l)
else:
    print("# 1 round (QUICK=1 or ROUNDS=1): no spread between rounds to show")
print("# targets, nproxy median / MPI median, every delay: 2 ranks: >= 1 MiB aim <= 1x, must <= 1.2x;")
print("#   64 KiB aim <= 1.5x, must <= 2x; 1 KiB aim <= 4x, must <= 6x.  4 ranks: >= 1 MiB aim <= 1x,")
print("#   must <= 1.5x; 64 KiB must <= 2.5x; 1 KiB must <= 8x.")
print("#   This run: aim met in %d of %d rows, must met in %d of %d rows (informational, never a failure)."
      % (met["aim"][0], met["aim"][1], met["must"][0], met["must"][1]))
note = os.environ.get("COLL_MPI_NOTE")
if note:
    print("# " + note)

print()
wl = os.environ["COLL_WAIT"]
dl = int(os.environ["COLL_WAIT_DELAY"])
print("CPU while waiting on the device: nproxy-run -p 2, device delay %d us, 1K, 10 timed iterations" % dl)
if wl == "FAILED":
    print("  FAILED (see above)")
elif wl == "n/a":
    print("  n/a: this nproxy-run's --json has no cpu_s/timed_wall_s")
    print("  targets: aim <= 0.05 core per process, must <= 0.25 core for the 2-rank job")
else:
    cpu, wall, iters, procs = wl.split()
    cpu, wall, procs = float(cpu), float(wall), int(procs)
    cores = cpu / wall
    print("  %.4f cores for the job (%.4f per process): %.4f CPU s over %.3f s of timed wall, %s iterations"
          % (cores, cores / procs, cpu, wall, iters))
    print("  aim  <= 0.05 core per process:    %.4f  %s" % (cores / procs, "PASS" if cores / procs <= 0.05 else "MISS"))
    print("  must <= 0.25 core for the 2 ranks: %.4f  %s" % (cores, "PASS" if cores <= 0.25 else "MISS"))
    print("  (informational: targets never fail the benchmark)")
EOF
rc_render=$?
((rc_render)) && { echo "coll_run: rendering the table failed" >&2; failed=$((failed + 1)); }
if [[ -n ${BENCH_RECORDS:-} ]] &&
	! python3 "$here/coll_record.py" "$rec" "$BENCH_RECORDS" "${BENCH_GROUP:-coll}"; then
	echo "coll_run: recording the results for the report failed" >&2
	failed=$((failed + 1))
fi

echo "# nproxy-run $(cat "$tmp/np.meta" 2>/dev/null || echo '?'), forked processes: $np_bind"
[[ -n ${BENCH_RECORDS:-} ]] && printf 'meta\tcoll_nproxy_run\tnproxy-run %s, forked processes: %s\n' \
	"$(cat "$tmp/np.meta" 2>/dev/null || echo '?')" "$np_bind" >>"$BENCH_RECORDS"
if ((have_mpi)); then
	bind_desc="Open MPI's default policy"
	[[ -n ${MPI_BIND:-} ]] && bind_desc="--bind-to $MPI_BIND (MPI_BIND)"
	line="# $(mpirun --version 2>/dev/null | head -n1), binding: $bind_desc:"
	for p in "${RANKS[@]}"; do
		line+=" np=$p: $(cat "$tmp/bind.$p" 2>/dev/null || echo '?');"
	done
	echo "$line"
	echo "# Open MPI vader single copy: $mpi_copy ($mpi_copy_why)"
	[[ -n ${BENCH_RECORDS:-} ]] && printf 'meta\tcoll_mpi_single_copy\t%s (%s)\n' \
		"$mpi_copy" "$mpi_copy_why" >>"$BENCH_RECORDS"
fi
echo "# coll_run: $(($(date +%s) - start)) s, load now $(cut -d' ' -f1-3 /proc/loadavg)"
if ((failed)); then
	echo "coll_run: $failed run(s) failed" >&2
	exit 1
fi
exit 0
