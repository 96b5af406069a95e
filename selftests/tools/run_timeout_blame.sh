#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run's own --timeout names the rank that stalled, with the evidence
# nproxyctl hang-report gives, and lists the others as its victims:
#   sem      rank 1's device program waits on a semaphore nobody adds to:
#            rank 1 named with its task, trigger word, program step and
#            semaphore; ranks 0, 2, 3 "waiting on rank 1 (victim)";
#   trigger  rank 1's device program sleeps before its trigger: the step
#            is a DELAY;
#   stop     rank 1's process stops itself: named as stopped;
#   first    the hang is in the first size: stdout still says why.
# Exit 3 every time, and no rank left running.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd timeout
# The supervisor reads its ranks' regions with pidfd_getfd(2), as hang-report.
((EUID == 0)) || [[ $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0) -le 1 ]] ||
	tap_skip_all "ptrace_scope > 1: the supervisor cannot read its ranks' regions"
tap_tmpdir
export NPROXY_HANDSHAKE=memfd
unset NPROXY_RANK OMPI_COMM_WORLD_RANK SLURM_PROCID PMIX_RANK PMI_RANK
tap_plan 5

# blame HANG SIZES DESC EXPECT...: the job with NPROXY_RUN_HANG=HANG over
# SIZES; one result: it exits 3 and every EXPECT holds.  An EXPECT is
# "out REGEX" or "err REGEX" (a line of stdout / stderr matches), "err2 REGEX"
# (at least two lines of stderr do) or "err! REGEX" (none does).
blame() {
	local hang=$1 sizes=$2 desc=$3 e kind re ok=1 rc
	shift 3
	NPROXY_TEST_MARK=blame-$$ NPROXY_RUN_HANG=$hang timeout 60 "$RUN" -p 4 -s "$sizes" -n 5 \
		--timeout 6 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	((rc == 3)) || ok=0
	for e; do
		kind=${e%% *} re=${e#* }
		case $kind in
		out) grep -Eq -- "$re" "$tmp/out" || ok=0 ;;
		err) grep -Eq -- "$re" "$tmp/err" || ok=0 ;;
		err2) (($(grep -Ec -- "$re" "$tmp/err") >= 2)) || ok=0 ;;
		err!) ! grep -Eq -- "$re" "$tmp/err" || ok=0 ;;
		esac
	done
	if ((ok)); then
		tap_ok "$desc"
	else
		tap_fail "$desc" "exit $rc" "stdout:" "$(cat "$tmp/out")" "stderr:" "$(cat "$tmp/err")"
	fi
}

victims='^nproxy-run:   rank (0|2|3) \(pid [0-9]+\): waiting on rank 1 \(victim\)'

blame 1:2:sem 4K "sem: exit 3, rank 1 stalled with task, trigger word, step and semaphore; the others its victims" \
	'err ^nproxy-run: timeout after 6 s: rank 1 \(pid [0-9]+\) stalled: task NETWORK of op 2 in WAITING_DEVICE_TRIGGER for [0-9.]+ s: stream 0 trigger still 0xFFFFFFFF \(device program at step 0 WAIT_SEM [0-9]+ >= [0-9]+, sem [0-9]+ = 0\)$' \
	"err2 $victims" 'err! peer rank 0 .* died'
blame 1:2:trigger 4K "trigger: exit 3, rank 1 stalled in its device program's DELAY; victims listed" \
	'err ^nproxy-run: timeout after 6 s: rank 1 \(pid [0-9]+\) stalled: .*WAITING_DEVICE_TRIGGER .*trigger still 0xFFFFFFFF \(device program at step 0 DELAY ' \
	"err $victims"
blame 1:2:stop 4K "stop: exit 3, rank 1's process named as stopped; victims listed" \
	'err ^nproxy-run: timeout after 6 s: rank 1 \(pid [0-9]+\) stalled: its process is stopped \(state T\)$' \
	"err $victims|^nproxy-run:   also: rank (0|2|3): op 2 "
blame 1:1:sem 4K,8K "first size hangs: stdout says the run stopped, why, and names rank 1" \
	'out ^# nproxy-run .*: allgather stopped before its first size finished: timeout \(exit 3\)$' \
	'out ^# timeout after 6 s: rank 1 \(pid [0-9]+\) stalled'

sleep 0.3
left=
for e in /proc/[0-9]*/environ; do
	grep -qz "^NPROXY_TEST_MARK=blame-$$\$" "$e" 2>/dev/null && left+=" ${e//[^0-9]/}"
done
if [[ -z $left ]]; then tap_ok "no rank left running"; else tap_fail "no rank left running" "still running:$left"; fi
tap_done
