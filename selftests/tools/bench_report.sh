#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# bench/report.py on a tiny fixture (no benchmark runs, no timing): the
# report it writes is well formed and its numbers are the fixture's own -
# figure = median over rounds, spread = min..max, ratio = figure / the
# baseline of the same pair, its spread from the per-round ratios; the
# provenance goes to results.json; one PNG per table when gnuplot is
# installed; a malformed record file is refused.  steal_round (bench/
# record.sh) on a fake /proc/stat refuses a heavy-steal round and runs it
# once more, keeps it as invalid when heavy twice; the report lists every
# round's steal and says which baseline figures were flagged (starved).
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build
REPORT=$TOP/bench/report.py
[[ -f $REPORT ]] || tap_skip_all "bench/report.py missing"
tap_require_cmd python3

tap_tmpdir
mkdir -p "$tmp/raw"
export BENCH_RECORDS=$tmp/raw/01-fix.tsv BENCH_GROUP=fix
. "$TOP/bench/record.sh"
rec_meta commit abc123
rec_meta load_before "1.00 0.50 0.25"
rec_meta load_after "2.00 1.00 0.50"
rec_table lat "Fixture latency" "size (bytes)" "latency (us)" lower log
# Two rounds; pair "2 ranks": nproxy 10, 12 vs baseline 20, 20 -> ratio
# 11/20 = 0.55, per-round ratios 0.50 and 0.60.
rec_sample lat "base 2" baseline "2 ranks" 1024 1 20 30
rec_sample lat "np 2" nproxy "2 ranks" 1024 1 10 15
rec_sample lat "base 2" baseline "2 ranks" 1024 2 20 40
rec_sample lat "np 2" nproxy "2 ranks" 1024 2 12 17
# Another pair: must not be compared with the "2 ranks" baseline.
rec_sample lat "np 4" nproxy "4 ranks" 1024 1 40
rec_sample lat "base 4" baseline "4 ranks" 1024 1 80
rec_sample lat "np 2" nproxy "2 ranks" 1048576 1 100
rec_sample lat "base 2" baseline "2 ranks" 1048576 1 50
rec_note lat "a note about the fixture"
# Round 2 of "base 2" at 1024 was starved of CPU.
rec_flag lat "base 2" 1024 2 "starved baseline: 20 us at 1024 B > 2 x 5 us at 4096 B"
rec_table cat "Fixture categories" "" "ns" lower category
rec_sample cat "only" nproxy "" "p50" 1 5
rec_sample cat "only" nproxy "" "max" 1 9
printf 'group\tfix\tok\tthe fixture\t3\n' >>"$BENCH_RECORDS"

# steal_round against a fake /proc/stat: each call of fake_round adds 100
# jiffies, the next value of $steals of them stolen.
export BENCH_PROC_STAT=$tmp/stat BENCH_MAX_STEAL_PCT=10
echo "cpu  100 0 100 800 0 0 0 0 0 0" >"$BENCH_PROC_STAT"
fake_round() {
	local st total
	read -r _ _ _ _ _ _ _ _ st _ <"$BENCH_PROC_STAT"
	total=$(awk '{ t = 0; for (i = 2; i <= 9; i++) t += $i; print t }' "$BENCH_PROC_STAT")
	calls=$((calls + 1))
	set -- $steals
	local add=${!calls:-0}
	echo "cpu  100 0 100 $((total - 200 - st - add + 100)) 0 0 0 $((st + add)) 0 0" >"$BENCH_PROC_STAT"
}
calls=0 steals="50 2"
steal_round "fix round 1" fake_round 2>/dev/null
calls1=$calls
calls=0 steals="30 40"
steal_round "fix round 2" fake_round 2>/dev/null
calls2=$calls
calls=0 steals="3"
steal_round "fix round 3" fake_round 2>/dev/null
calls3=$calls

tap_plan 10
if python3 "$REPORT" "$tmp/raw" "$tmp/out" >"$tmp/log" 2>&1; then
	tap_ok "report.py writes a report from the fixture"
else
	tap_fail "report.py writes a report from the fixture" "$(cat "$tmp/log")"
fi

md=$tmp/out/report.md
row=$(grep -F '| 1024 | np 2 |' "$md" 2>/dev/null)
if [[ $row == "| 1024 | np 2 | 11.0 | 16.0 | 2 | 10.0..12.0 | base 2"*" | 20.0 | 0.55"*" | 0.50..0.60 |" ]]; then
	tap_ok "report.md row: median, p99, rounds, spread, baseline, ratio and its spread"
else
	tap_fail "report.md row: median, p99, rounds, spread, baseline, ratio and its spread" "got: $row"
fi

rows4=$(grep -cF '| 1024 | np 4 |' "$md" 2>/dev/null)
if grep -qF '| 1024 | np 4 | 40.0 | n/a | 1 | 1 round | base 4 | 80.0 | 0.50 |' "$md" && [[ $rows4 == 1 ]] &&
	grep -qF '| 1048576 | np 2 | 100.0 | n/a | 1 | 1 round | base 2 | 50.0 | 2.00 |' "$md" &&
	grep -q '^## Fixture latency$' "$md" && grep -q '^a note about the fixture$' "$md" &&
	grep -qF '| p50 | only | 5.00 |' "$md"; then
	tap_ok "report.md: baselines paired by pair key, one table per benchmark, notes kept"
else
	tap_fail "report.md: baselines paired by pair key, one table per benchmark, notes kept" "$(cat "$md" 2>/dev/null)"
fi

if python3 - "$tmp/out/results.json" >"$tmp/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["meta"]["commit"] == "abc123", d["meta"]
assert d["meta"]["load_before"] == "1.00 0.50 0.25" and d["meta"]["load_after"] == "2.00 1.00 0.50"
assert d["groups"]["fix"]["status"] == "ok"
t = {x["id"]: x for x in d["tables"]}
assert set(t) == {"lat", "cat"}, t.keys()
s = [x for x in t["lat"]["series"] if x["series"] == "np 2" and x["x"] == "1024"][0]
assert s["values"] == [10.0, 12.0] and s["p99s"] == [15.0, 17.0] and s["rounds"] == 2, s
r = [x for x in t["lat"]["rows"] if x["series"] == "np 2" and x["x"] == "1024"][0]
b = r["baselines"]
assert len(b) == 1 and b[0]["series"] == "base 2" and abs(b[0]["ratio"] - 0.55) < 1e-9, b
assert abs(b[0]["ratio_min"] - 0.5) < 1e-9 and abs(b[0]["ratio_max"] - 0.6) < 1e-9, b
PY
then
	tap_ok "results.json: provenance, per-round values, ratios"
else
	tap_fail "results.json: provenance, per-round values, ratios" "$(cat "$tmp/py")"
fi

if ! command -v gnuplot >/dev/null; then
	tap_skip "one PNG per table" "gnuplot not installed (scripts/deps.sh installs gnuplot-nox)"
elif [[ $(head -c 4 "$tmp/out/lat.png" 2>/dev/null | od -An -c | tr -d ' ') == 211PNG &&
	$(head -c 4 "$tmp/out/cat.png" 2>/dev/null | od -An -c | tr -d ' ') == 211PNG ]] &&
	grep -qF '(lat.png)' "$md"; then
	tap_ok "one PNG per table, linked from report.md"
else
	tap_fail "one PNG per table, linked from report.md" "$(ls -l "$tmp/out")"
fi

steal_recs=$(awk -F'\t' '$1 == "steal" { printf "%s=%s:%s ", $3, $4, $5 }' "$BENCH_RECORDS")
if [[ $calls1 == 2 && $calls2 == 2 && $calls3 == 1 &&
	$steal_recs == "fix round 1=50.0:rerun fix round 1=2.0:ok fix round 2=30.0:rerun fix round 2=40.0:invalid fix round 3=3.0:ok " ]]; then
	tap_ok "steal_round: a heavy-steal round is refused and run once more; heavy twice is kept as invalid"
else
	tap_fail "steal_round: refuse, re-run once, invalid" "calls $calls1 $calls2 $calls3" "records: $steal_recs"
fi

if grep -qF '| fix | fix round 1 | 50.0% | refused, run again |' "$md" &&
	grep -qF '| fix | fix round 2 | 40.0% | **INVALID** (kept) |' "$md" &&
	grep -qF '**INVALID rounds**: fix round 2 (40.0%)' "$md" &&
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if len(d["steal"]) == 5 and d["steal"][3]["verdict"] == "invalid" else 1)' \
		"$tmp/out/results.json"; then
	tap_ok "report: every round's steal, refused and invalid rounds named, invalid tables marked"
else
	tap_fail "report: steal section" "$(grep -A8 '^## Steal' "$md")"
fi

row=$(grep -F '| 1024 | np 2 |' "$md" 2>/dev/null)
if [[ $row == *"| base 2 (starved baseline in 1 of 2 rounds: 20 us at 1024 B > 2 x 5 us at 4096 B) | 20.0 | 0.55 (baseline flagged) |"* ]] &&
	! grep -F '| 1024 | np 4 |' "$md" | grep -q flagged; then
	tap_ok "report: a flagged baseline says why beside its series and its ratio"
else
	tap_fail "report: flagged baseline" "got: $row"
fi

# coll_record.py: nproxy-run at a device delay D is paired with Open MPI + D.
cat >"$tmp/coll.rec" <<'REC'
mpi 2 allgather - 1 0 1024 10 100 120 0.1 0.2
np 2 allgather 0 1 0 1024 10 150 170 0.1 0.2
np 2 allgather 10 1 0 1024 10 160 180 0.1 0.2
REC
if COLL_DELAYS="0 10" COLL_WAIT=FAILED COLL_WAIT_DELAY=200000 \
	python3 "$TOP/bench/coll_record.py" "$tmp/coll.rec" "$tmp/coll.tsv" coll 2>"$tmp/coll.err" &&
	python3 - "$tmp/coll.tsv" <<'PY'
import sys
s = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.startswith("sample\tcoll_lat_")]
got = {(f[2], f[4]): float(f[7]) for f in s}
assert got[("Open MPI 2 ranks", "2 ranks")] == 100, got
assert got[("Open MPI 2 ranks + 10 us device delay", "2 ranks, device delay 10 us")] == 110, got
assert got[("nproxy-run 2 ranks, device delay 10 us", "2 ranks, device delay 10 us")] == 160, got
assert got[("nproxy-run 2 ranks, device delay 0 us", "2 ranks")] == 150, got
PY
then
	tap_ok "coll_record.py: rows at a device delay D compare against Open MPI + D"
else
	tap_fail "coll_record.py: Open MPI + device delay" "$(cat "$tmp/coll.err" "$tmp/coll.tsv")"
fi

printf 'sample\tnope\tx\tnproxy\t\t1\t1\t1\t-\n' >"$tmp/raw/02-bad.tsv"
if python3 "$REPORT" "$tmp/raw" "$tmp/out2" >"$tmp/log2" 2>&1; then
	tap_fail "a sample for an undeclared table is refused" "report.py exited 0"
else
	tap_ok "a sample for an undeclared table is refused"
fi
tap_done
