#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxyctl top and hang-report on real hangs of nproxy-run (memfd backend;
# the kmod backend runs the same script in the VM: hang_report.vm.sh):
#   sem      rank 1's device program waits on a semaphore nobody adds to,
#            so its trigger never comes: the report names rank 1, its pid,
#            NETWORK in WAITING_DEVICE_TRIGGER, the sentinel, the step, the
#            semaphore and its value; rank 0 is named waiting on rank 1;
#   trigger  rank 0's device program sleeps before its trigger: the step is
#            a DELAY;
#   stop     rank 1's process stops (SIGSTOP): its peers wait on the
#            network and the report names rank 1's pid as stopped;
#   healthy  a running job with no hang: exit 0, and top --json lists its
#            ranks with their workers;
#   compute  every rank of a 2-rank job computes 12 s between two ops: the
#            last op's host barrier waits for the next op (deferred, to be
#            carried on its data), and that is not a hang.
# Each job is bounded by --timeout and killed at the end of its case.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run nproxyctl
tap_require_cmd python3 timeout
BACKEND=${HANG_BACKEND:-memfd}
export NPROXY_HANDSHAKE=$BACKEND
((EUID == 0)) || tap_skip_all "hang-report reads other processes' fds (pidfd_getfd): needs root"

job=
tap_tmpdir_job TERM job

# start_job HANG PROCS: nproxy-run in the background, its pid in $job.
start_job() {
	NPROXY_RUN_HANG=$1 "$RUN" --procs "$2" --size 4K --iters 200 --warmup 0 \
		--timeout 90 >"$tmp/job.out" 2>&1 &
	job=$!
}

stop_job() {
	kill -TERM "$job" 2>/dev/null
	wait "$job" 2>/dev/null
	job=
}

# wait_hang: run hang-report on the job until it finds a hang (exit 5),
# at most 60 s; its output in $tmp/report, exit status in $report_rc.
wait_hang() {
	local i
	for ((i = 0; i < 120; i++)); do
		timeout 20 "$CTL" hang-report --min-age 2 --pid "$job" >"$tmp/report" 2>&1
		report_rc=$?
		((report_rc == 5)) && return 0
		kill -0 "$job" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

# report_until REGEX: the hang lasts, so a task that began to wait a moment
# after the first one reached --min-age shows in a later report; ask again
# (up to 5 s) until a line matches.
report_until() {
	local i
	for ((i = 0; i < 10; i++)); do
		grep -Eq "$1" "$tmp/report" && return 0
		sleep 0.5
		timeout 20 "$CTL" hang-report --min-age 2 --pid "$job" >"$tmp/report" 2>&1
	done
	grep -Eq "$1" "$tmp/report"
}

# pid_of RANK: the pid top --json shows for RANK of the job.
pid_of() {
	timeout 20 "$CTL" --json top --count 1 --pid "$job" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print([p["pid"] for p in d["proxies"] if p["rank"]==int(sys.argv[1])][0])' "$1"
}

# found_or_fail DESC CMD...: one result from CMD's status, the report as
# the diagnostic when it fails.
found_or_fail() {
	local desc=$1
	shift
	if "$@"; then tap_ok "$desc"; else tap_fail "$desc" "$(cat "$tmp/report")"; fi
}

# no_hang_found DESC: hang-report never found the hang.
no_hang_found() {
	tap_fail "$1: hang-report finds the hang" "exit $report_rc" "$(cat "$tmp/report" "$tmp/job.out")"
}

# ---- a semaphore never incremented: the device never triggers
start_job 1:2:sem 2
if wait_hang; then
	p1=$(pid_of 1)
	if grep -Eq "^rank 1 \(pid $p1\) task NETWORK in WAITING_DEVICE_TRIGGER for [0-9.]+ s: stream 0 trigger still 0xFFFFFFFF \(device program at step 0 WAIT_SEM 2 >= 1099511627776, sem 2 = 0\)$" "$tmp/report"; then
		tap_ok "sem never incremented: rank 1, its pid, NETWORK, WAITING_DEVICE_TRIGGER, trigger, step, sem and value named"
	else
		tap_fail "sem never incremented: rank 1 named with the evidence" "$(cat "$tmp/report")"
	fi
	# Rank 0's task made its last progress after rank 1 stopped: it may
	# reach --min-age a little later, so look again (at most 20 s).
	for ((i = 0; i < 40; i++)); do
		grep -Eq "^rank 0 \(pid [0-9]+\) task NETWORK in (IDLE|PROGRESSING) .*rank 1 \(pid $p1\) has not started op 2: its task NETWORK is in WAITING_DEVICE_TRIGGER" "$tmp/report" && break
		sleep 0.5
		timeout 20 "$CTL" hang-report --min-age 2 --pid "$job" >"$tmp/report" 2>&1
	done
	if grep -Eq "^rank 0 \(pid [0-9]+\) task NETWORK in (IDLE|PROGRESSING) .*rank 1 \(pid $p1\) has not started op 2: its task NETWORK is in WAITING_DEVICE_TRIGGER" "$tmp/report"; then
		tap_ok "sem never incremented: rank 0 is shown waiting for rank 1"
	else
		tap_fail "sem never incremented: rank 0 waits for rank 1" "$(cat "$tmp/report")"
	fi
	timeout 20 "$CTL" --json hang-report --min-age 2 --pid "$job" >"$tmp/report.json"
	rc=$?
	if ((rc == 5)) && python3 - "$tmp/report.json" "$p1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["hang"] is True, d
s = [t for t in d["stuck"] if t["rank"] == 1 and t["task"] == "NETWORK"]
assert s, d
t = s[0]
assert t["pid"] == int(sys.argv[2]) and t["state"] == "WAITING_DEVICE_TRIGGER", t
assert t["triggers"][0] == 0xFFFFFFFF and t["prog_state"] == "running" and t["prog_step"] == 0, t
assert t["op"] == 2 and t["for_s"] >= 2, t
PY
	then
		tap_ok "sem never incremented, --json: exit 5, rank 1's task with trigger, program state and step"
	else
		tap_fail "sem never incremented, --json" "exit $rc" "$(cat "$tmp/report.json")"
	fi
else
	no_hang_found "sem never incremented"
	tap_skip "sem never incremented: rank 0 waits for rank 1" "no report"
	tap_skip "sem never incremented, --json" "no report"
fi
stop_job

# ---- the device never reaches the network stage (a long DELAY)
start_job 0:3:trigger 2
if wait_hang; then
	p0=$(pid_of 0)
	found_or_fail "device never triggers: rank 0, its pid, the sentinel and the DELAY step named" \
		report_until "^rank 0 \(pid $p0\) task NETWORK in WAITING_DEVICE_TRIGGER for [0-9.]+ s: stream 0 trigger still 0xFFFFFFFF \(device program at step 0 DELAY 60.000 s\)$"
else
	no_hang_found "device never triggers"
fi
stop_job

# stopped_named PID: the report has a waiting rank naming rank 1 (PID) as
# stopped, and every line of rank 1's own says its process is stopped.
stopped_named() {
	grep -Eq "^rank [02] \(pid [0-9]+\) task (NETWORK|BARRIER) in (IDLE|PROGRESSING) .*rank 1 \(pid $1\) is stopped \(state T\)" "$tmp/report" &&
		! grep "^rank 1 " "$tmp/report" | grep -vq "\[its own process is stopped, state T\]$"
}

# ---- a peer stops progressing (its process is stopped)
start_job 1:2:stop 3
if wait_hang; then
	p1=$(pid_of 1)
	found_or_fail "stopped peer: the waiting ranks name rank 1 and its pid as stopped" stopped_named "$p1"
else
	no_hang_found "stopped peer"
fi
stop_job

# ---- no hang: a healthy job; top lists its ranks
# Long enough to outlast every check below (stop_job ends it).
NPROXY_RUN_HANG= "$RUN" --procs 2 --size 4K --iters 1000000 --warmup 0 --timeout 90 \
	>"$tmp/job.out" 2>&1 &
job=$!
found=
for ((i = 0; i < 120; i++)); do
	timeout 20 "$CTL" --json top --count 2 --interval 0.5 --pid "$job" >"$tmp/top.json" 2>&1
	if python3 - "$tmp/top.json" "$BACKEND" 2>"$tmp/py.err" <<'PY'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(docs) == 2, docs
p = docs[1]["proxies"]
assert sorted(x["rank"] for x in p) == [0, 1], p
for x in p:
    assert x["n_ranks"] == 2 and x["worker_tid"] > 0 and x["ops_enqueued"] > 0, x
    assert x["backend"] == sys.argv[2] and x["ops_per_s"] is not None, x
PY
	then
		found=1
		break
	fi
	sleep 0.5
done
if [[ -n $found ]]; then
	tap_ok "top --json: both ranks of a running job on the $BACKEND backend, their workers and op counts"
else
	tap_fail "top --json lists the running job" "$(cat "$tmp/py.err" "$tmp/top.json" "$tmp/job.out")"
fi
timeout 20 "$CTL" hang-report --min-age 10 --pid "$job" >"$tmp/report" 2>&1
rc=$?
if ((rc == 0)) && grep -q "^no hang: 0 task(s)" "$tmp/report"; then
	tap_ok "healthy job: hang-report exits 0, no hang"
else
	tap_fail "healthy job: hang-report exits 0" "exit $rc" "$(cat "$tmp/report")"
fi
timeout 20 "$CTL" top --count 1 --pid "$job" >"$tmp/top.txt" 2>&1
rc=$?
if ((rc == 0)) && grep -Eq "^ +$job|^ +[0-9]+ nproxy-run +[01] +2 " "$tmp/top.txt"; then
	tap_ok "top (text): a row per rank"
else
	tap_fail "top (text): a row per rank" "exit $rc" "$(cat "$tmp/top.txt")"
fi
stop_job

# ---- no hang: the application computes between two ops.  At 2 ranks an
# op's host barrier is carried by the next op, so it waits in IDLE until
# the application starts that op; the page flags it DEFERRED.
NPROXY_RUN_PAUSE=3:12000 "$RUN" --procs 2 --size 4K --iters 5 --warmup 0 --timeout 90 \
	>"$tmp/job.out" 2>&1 &
job=$!
# Op 3 starts 12 s after op 2 ends.  Ask until a task has waited --min-age
# 2 (however slow the job's start): the barriers are reported then, as
# deferred or (the bug) as a hang.
for ((i = 0; i < 20; i++)); do
	sleep 0.5
	timeout 20 "$CTL" hang-report --min-age 2 --pid "$job" >"$tmp/report" 2>&1
	rc=$?
	grep -Eq "^hang:|deferred" "$tmp/report" && break
done
if ((rc == 0)) && grep -q "^no hang: 0 task(s) without progress for >= 2.0 s (2 host barrier(s) deferred" "$tmp/report"; then
	tap_ok "computing between ops: the deferred host barriers are no hang (exit 0), and are mentioned"
else
	tap_fail "computing between ops is no hang" "exit $rc" "$(cat "$tmp/report" "$tmp/job.out")"
fi
timeout 20 "$CTL" --json hang-report --min-age 2 --pid "$job" >"$tmp/report.json" 2>&1
rc=$?
if ((rc == 0)) && python3 - "$tmp/report.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["hang"] is False and d["stuck"] == [] and d["deferred"] == 2, d
PY
then
	tap_ok "computing between ops, --json: no stuck task, 2 deferred"
else
	tap_fail "computing between ops, --json" "exit $rc" "$(cat "$tmp/report.json")"
fi
timeout 20 "$CTL" --json top --count 1 --pid "$job" >"$tmp/top.json" 2>&1
if python3 - "$tmp/top.json" 2>"$tmp/py.err" <<'PY'
import json, sys
p = json.loads(open(sys.argv[1]).read())["proxies"]
assert len(p) == 2, p
for x in p:
    # The deferred barrier is IDLE, but no task in flight stalls.
    assert x["tasks"]["IDLE"] >= 1 and x.get("oldest_task_progress_age_s") is None, x
PY
then
	tap_ok "computing between ops, top --json: the deferred barrier is IDLE and not a stall age"
else
	tap_fail "computing between ops, top --json" "$(cat "$tmp/py.err" "$tmp/top.json")"
fi
if wait "$job"; then
	tap_ok "computing between ops: the job then completes"
else
	tap_fail "computing between ops: the job completes" "$(cat "$tmp/job.out")"
fi
job=
tap_done
