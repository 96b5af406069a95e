#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run's table as nccl-tests users read it: a row is printed as soon
# as its size is done (before the run ends); Ctrl-C keeps every finished row,
# prints the footer and exits 130 without leaving a rank behind; an
# interrupted --json run holds only finished sizes; -b/-e/-f make a sweep.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

pid=
tap_tmpdir_job KILL pid
export NPROXY_HANDSHAKE=memfd
unset NPROXY_RANK OMPI_COMM_WORLD_RANK SLURM_PROCID PMIX_RANK PMI_RANK

# no_leftovers MARKER: pids of processes still carrying MARKER in their environment.
leftovers() {
	local left= e
	for e in /proc/[0-9]*/environ; do
		grep -qz "^NPROXY_TEST_MARK=$1\$" "$e" 2>/dev/null && left+=" ${e//[^0-9]/}"
	done
	echo "$left"
}

# wait_for FILE REGEX BOUND_S: poll until FILE has a line matching REGEX.
wait_for() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || { grep -Eq "$2" "$1" 2>/dev/null; return; }
		sleep 0.1
	done
	return 1
}

tap_plan 6

# Each operation waits 300 ms for the emulated device: after the first size,
# two more take at least 1.8 s, so the first row must be out while it runs.
mark=stream-$$
NPROXY_TEST_MARK=$mark "$RUN" -p 2 -s 4K,8K,16K -n 3 -w 0 --device-delay-us 300000 --timeout 100 \
	>"$tmp/out" 2>"$tmp/err" &
pid=$!
if wait_for "$tmp/out" '^ +4K +1024 +uint32' 90 && kill -0 "$pid" 2>/dev/null; then
	tap_ok "the 4K row is printed while the run goes on"
	streamed=1
else
	tap_fail "the 4K row is printed while the run goes on" "stdout:" "$(cat "$tmp/out")" "stderr:" "$(cat "$tmp/err")"
	streamed=
fi

# Ctrl-C now: the finished row stays, the footer says interrupted, exit 130.
if [[ -n $streamed ]]; then
	kill -INT "$pid"
	rc=0
	for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	wait "$pid"
	rc=$?
	pid=
	if ((rc == 130)) && grep -Eq '^ +4K +1024 +uint32 +none +3 ' "$tmp/out" &&
		grep -q '^# Avg bus bandwidth .*interrupted' "$tmp/out" && grep -q 'interrupted by signal 2' "$tmp/err"; then
		tap_ok "Ctrl-C: exit 130, the finished rows and the footer kept"
	else
		tap_fail "Ctrl-C: exit 130, the finished rows and the footer kept" "exit $rc" "$(cat "$tmp/out")" "$(cat "$tmp/err")"
	fi
else
	tap_skip "Ctrl-C: exit 130, the finished rows and the footer kept" "no row was streamed to interrupt after"
fi
sleep 0.5
left=$(leftovers "$mark")
if [[ -z $left ]]; then tap_ok "Ctrl-C: no rank left running"
else tap_fail "Ctrl-C: no rank left running" "still running:$left"; fi

# --json interrupted: whatever finished is there, complete; status interrupted.
mark=json-$$
NPROXY_TEST_MARK=$mark "$RUN" --json -p 2 -s 4K,8K,16K -n 3 -w 0 --device-delay-us 300000 --timeout 100 \
	>"$tmp/json" 2>"$tmp/json.err" &
pid=$!
sleep 2
kill -INT "$pid"
for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid"
rc=$?
pid=
if out=$(python3 - "$tmp/json" "$rc" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rc = int(sys.argv[2])
if rc == 0:
    # The machine was fast enough to finish in 2 s: then every size is there.
    assert d["status"] == "ok" and len(d["results"]) == 3, d
else:
    assert rc == 130 and d["status"] == "interrupted" and d["exit_code"] == 130, (rc, d["status"])
    assert len(d["results"]) < 3, d["results"]
for r in d["results"]:
    assert r["iters"] == 3 and r["verified"], r
print("%d finished sizes" % len(d["results"]))
PY
); then
	tap_ok "--json, Ctrl-C: status interrupted, only finished sizes ($out)"
else
	tap_fail "--json, Ctrl-C: status interrupted, only finished sizes" "exit $rc" "$out" "$(cat "$tmp/json")" "$(cat "$tmp/json.err")"
fi

# nccl-tests' sweep flags.
out=$(timeout 120 "$RUN" --json -p 2 -b 1K -e 4K -f 2 -n 1 -w 0 --timeout 90 2>&1)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert [r["bytes"] for r in d["results"]] == [1024, 2048, 4096], d["results"]' "$out" 2>/dev/null; then
	tap_ok "-b 1K -e 4K -f 2: 1K, 2K, 4K"
else
	tap_fail "-b 1K -e 4K -f 2: 1K, 2K, 4K" "$out"
fi
out=$(timeout 120 "$RUN" --json -p 2 -b 64K -n 1 -w 0 --timeout 90 2>&1)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert [r["bytes"] for r in d["results"]] == [65536, 131072, 262144, 524288, 1048576], d["results"]' "$out" 2>/dev/null; then
	tap_ok "-b 64K alone: up to the default maximum 1M by 2"
else
	tap_fail "-b 64K alone: up to the default maximum 1M by 2" "$out"
fi
tap_done
