#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Kill points: rank 1 of a 3-process nproxy-run dies by SIGKILL
# (NPROXY_RUN_KILL_AT=1:PHASE) at each phase of a job -- bananaphone
# rendezvous, engine setup, handshake region, proxy comm, the barrier
# before an iteration, a task waiting for its device trigger, a transfer
# in flight, teardown.  Each time: exit 4 within the bound, rank 1 named
# with SIGKILL and the phase it was in; from the engine setup on, every
# survivor reports the death itself, naming rank 1 (before it, rank 1 never
# reached the leader, which only a join timeout could tell: the supervisor
# names it and stops the others); and nothing is left: no process of the
# job, no libfabric shm file of the killed rank (/dev/shm/<pid>:*).
#
# A survivor that gives up because rank 1 died records it on the bus
# (nproxy_bp_abandon), so a survivor that then sees *it* exit still names rank 1.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd timeout
export NPROXY_HANDSHAKE=memfd

BOUND_S=60	# the job's --timeout; a hang would hit it (exit 3), not exit 4

no_leftovers() {
	local left= e
	for e in /proc/[0-9]*/environ; do
		grep -qz "^NPROXY_TEST_MARK=$2\$" "$e" 2>/dev/null && left+=" ${e//[^0-9]/}"
	done
	if [[ -z $left ]]; then tap_ok "$1"; else tap_fail "$1" "still running:$left"; fi
}

declare -A phase_text=(
	[rendezvous]="bananaphone rendezvous \(rank 1\)"
	[engine]="engine setup \(nproxy_net_open, rank 1\)"
	[region]="handshake region \(rank 1\)"
	[comm]="proxy comm setup \(rank 1\)"
	[barrier]="allgather 1048576 B"
	[trigger]="allgather 1048576 B"
	[transfer]="allgather 1048576 B"
	[teardown]="teardown"
)

tap_plan 32
for phase in rendezvous engine region comm barrier trigger transfer teardown; do
	mark=killat-$phase-$$
	start=$SECONDS
	out=$(NPROXY_TEST_MARK=$mark NPROXY_RUN_KILL_AT=1:$phase timeout -k 5 $((BOUND_S + 60)) \
		"$RUN" --procs 3 --size 1M --iters 3 --warmup 1 --timeout $BOUND_S \
		--device-delay-us 20000 -q 2>&1)
	rc=$?
	took=$((SECONDS - start))
	pid=$(sed -nE 's/^nproxy-run: rank 1 \(pid ([0-9]+)\) was killed by signal SIGKILL.*/\1/p' <<<"$out")
	if ((rc == 4 && took < BOUND_S)) && [[ -n $pid ]] &&
	   grep -Eq "^nproxy-run: rank 1 \(pid $pid\) was killed by signal SIGKILL \(Killed\) during ${phase_text[$phase]}" <<<"$out"; then
		tap_ok "$phase: exit 4 after $took s, rank 1 named with SIGKILL and its phase"
	else
		tap_fail "$phase: exit 4, rank 1 named" "exit $rc after $took s" "$out"
	fi
	if [[ $phase == rendezvous ]]; then
		tap_skip "$phase: survivors name rank 1" "rank 1 never reached the leader: only the leader's join timeout could tell, the supervisor names it"
	else
		missing= misblamed=
		for r in 0 2; do
			# "also: rank R: peer rank 1 (pid P) died ..." or the library's
			# "rank R: rank 1 (pid P) died" when the survivor's own error says
			# "see the log above".
			grep -Eq "(also: rank $r: .*rank 1 \(pid $pid\))|(rank $r: rank 1 \(pid $pid\) died)" <<<"$out" &&
				continue
			o=$((2 - r))
			# Known: a survivor waiting on the other survivor, which exited
			# (on purpose without hanging up) after seeing rank 1 die, may
			# blame that one: bananaphone names the first dead peer it polls.
			if grep -Eq "(also: rank $r: .*peer rank $o \(pid)|(rank $r: rank $o \(pid [0-9]+\) died)" <<<"$out"; then
				misblamed+=" $r->$o"
			else
				missing+=" $r"
			fi
		done
		if [[ -z $missing && -z $misblamed ]]; then
			tap_ok "$phase: every survivor named rank 1 itself"
		else
			tap_fail "$phase: every survivor named rank 1 itself" \
				"silent survivors:${missing:- none}; survivors blaming another:${misblamed:- none}" "$out"
		fi
	fi
	no_leftovers "$phase: no process of the job left" "$mark"
	# The killed rank could not remove its libfabric shm file: nproxy-run's
	# sweep (or the survivors') must have.
	left=$(compgen -G "/dev/shm/$pid:*" || true)
	if [[ -n $pid && -z $left ]]; then
		tap_ok "$phase: no shm file of the killed rank left"
	else
		tap_fail "$phase: no shm file of the killed rank left" "pid '$pid': $left"
	fi
done
tap_done
