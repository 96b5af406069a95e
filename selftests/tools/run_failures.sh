#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run's failure exits, each with a message naming the rank:
#   1  a corrupted byte (NPROXY_RUN_CORRUPT) is caught by verification;
#   4  a rank killed mid-run (NPROXY_RUN_KILL) is named with its signal
#      and the phase it was in, and the others are stopped instead of
#      hanging; a rank that dies of SIGBUS/SIGSEGV (NPROXY_RUN_CRASH) is
#      named with the signal, the fault address and the phase;
#   3  a device that never reaches the net stage within --timeout.
# Every case must end well inside its bound and leave no rank behind.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tap_tmpdir
export NPROXY_HANDSHAKE=memfd

# no_leftovers DESC MARKER: no process still carries MARKER in its environment.
no_leftovers() {
	local left=
	for e in /proc/[0-9]*/environ; do
		grep -qz "^NPROXY_TEST_MARK=$2\$" "$e" 2>/dev/null && left+=" ${e//[^0-9]/}"
	done
	if [[ -z $left ]]; then tap_ok "$1"; else tap_fail "$1" "still running:$left"; fi
}

# ---- verification failure
mark=verify-$$
out=$(NPROXY_TEST_MARK=$mark NPROXY_RUN_CORRUPT=2 timeout 120 "$RUN" --size 4K --iters 3 --warmup 1 --timeout 90 2>&1)
rc=$?
if ((rc == 1)) && grep -Eq "nproxy-run: rank 2: allgather 4096 B iteration [0-9]+: verification error at byte [0-9]+ \(chunk of rank 3\): got 0x[0-9a-f]{8}, expected 0x[0-9a-f]{8}" <<<"$out" &&
   grep -Eq " 4K +1024 +uint32 +none +3 .* 1 +1$" <<<"$out" && grep -q "^# Out of bounds values : 1 FAILED" <<<"$out"; then
	tap_ok "corrupted byte: exit 1, rank 2 and the byte named, #wrong 1 in the table and the footer"
else
	tap_fail "corrupted byte: exit 1, rank 2 named" "exit $rc" "$out"
fi
no_leftovers "corrupted byte: no rank left running" "$mark"

NPROXY_RUN_CORRUPT=0 timeout 120 "$RUN" --json --collective allreduce --procs 3 --size 3K \
	--iters 2 --warmup 0 --timeout 90 >"$tmp/v.json" 2>/dev/null
rc=$?
if ((rc == 1)) && python3 - "$tmp/v.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
assert d["status"] == "verification-error" and d["exit_code"] == 1, d
assert d["error"].startswith("rank 0: allreduce 3072 B"), d["error"]
assert r["verified"] is False and r["verify_errors"] == 1 and r["iters"] == 2, r
PY
then
	tap_ok "corrupted byte, --json: status verification-error, error names rank 0"
else
	tap_fail "corrupted byte, --json" "exit $rc" "$(cat "$tmp/v.json")"
fi

# ---- a rank dies
mark=kill-$$
start=$SECONDS
out=$(NPROXY_TEST_MARK=$mark NPROXY_RUN_KILL=1:3 timeout 120 "$RUN" --size 4K --iters 50 --warmup 1 --timeout 90 2>&1)
rc=$?
if ((rc == 4)) && grep -Eq "^nproxy-run: rank 1 \(pid [0-9]+\) was killed by signal SIGKILL \(Killed\) during allgather 4096 B, after [0-9]+ iterations$" <<<"$out"; then
	tap_ok "killed rank: exit 4, rank 1, pid, signal and phase named ($((SECONDS - start)) s)"
else
	tap_fail "killed rank: exit 4, rank 1 named" "exit $rc" "$out"
fi
no_leftovers "killed rank: the other ranks were stopped" "$mark"

tap_expect "killed process of 2 ranks: both ranks named" 4 \
	"^nproxy-run: ranks 2-3 \(process 1, pid [0-9]+\) was killed by signal SIGKILL \(Killed\)" \
	env NPROXY_RUN_KILL=3:0 timeout 120 "$RUN" --procs 2 --ranks-per-proc 2 --size 4K --iters 5 \
	--warmup 0 --timeout 90
# The survivors' two ranks tear down in parallel while each tells the job
# of the death: none may crash doing it (the supervisor names such a rank
# "also: ... was killed by signal"; net/in_process_abort pins the cause).
crashed=
for ((i = 0; i < 6; i++)); do
	out=$(NPROXY_RUN_KILL=3:0 timeout 120 "$RUN" --procs 2 --ranks-per-proc 2 --size 4K \
		--iters 5 --warmup 0 --timeout 90 2>&1)
	if grep -q "also: .*was killed by signal" <<<"$out"; then
		crashed=$out
		break
	fi
done
if [[ -z $crashed ]]; then
	tap_ok "killed process of 2 ranks, 6 runs: no survivor dies of a signal in teardown"
else
	tap_fail "killed process of 2 ranks: a survivor died of a signal" "$crashed"
fi

# ---- a rank dies of a real fault: the signal, where, and in which phase
tap_expect "SIGBUS in a rank: exit 4, signal, fault address and phase named" 4 \
	"^nproxy-run: rank 1 \(pid [0-9]+\) was killed by signal SIGBUS \(Bus error\) at address 0x[0-9a-f]+ during allgather 4096 B, after 2 iterations$" \
	env NPROXY_RUN_CRASH=1:2:bus timeout 120 "$RUN" --procs 2 --size 4K --iters 20 --warmup 1 \
	--timeout 90
tap_expect "SIGSEGV in rank 0: exit 4, signal, fault address and phase named" 4 \
	"^nproxy-run: rank 0 \(pid [0-9]+\) was killed by signal SIGSEGV \(Segmentation fault\) at address 0x[0-9a-f]+ during allgather 4096 B, after 1 iteration$" \
	env NPROXY_RUN_CRASH=0:1:segv timeout 120 "$RUN" --procs 3 --size 4K --iters 20 --warmup 1 \
	--timeout 90

# launch_two VAR=VALUE NAME: ranks 0 and 1 as a launcher starts them (no
# supervisor), with VAR=VALUE in their environment, output in $tmp/NAME.R;
# their exit statuses in rc0 and rc1.
launch_two() {
	local port r pids=()
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	for r in 0 1; do
		env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMIX_RANK "$1" \
			NPROXY_RANK=$r NPROXY_WORLD_SIZE=2 NPROXY_LOCAL_RANK=$r NPROXY_LOCAL_SIZE=2 \
			NPROXY_ROOT_COMM_ID=127.0.0.1:$port timeout 120 "$RUN" --size 4K --iters 50 \
			--warmup 1 --timeout 90 >"$tmp/$2.$r" 2>&1 &
		pids[r]=$!
	done
	wait "${pids[0]}"; rc0=$?
	{ wait "${pids[1]}"; } 2>/dev/null; rc1=$?
}

# Under a launcher there is no supervisor: the survivor sees its local
# peer's pidfd and stops at once instead of at the engine's deadline.
start=$SECONDS
launch_two NPROXY_RUN_KILL=1:3 launched
took=$((SECONDS - start))
if ((rc0 == 4 && rc1 == 137)) && ((took < 30)) &&
   grep -Eq "^nproxy-run: rank 0: peer rank 1 \(pid [0-9]+\) died (during|before) op [0-9]+$" "$tmp/launched.0"; then
	tap_ok "launched, peer killed: survivor exits 4 naming rank 1 after ${took} s"
else
	tap_fail "launched, peer killed: survivor exits 4" "exit $rc0 / $rc1 after $took s" "$(cat "$tmp"/launched.*)"
fi

# ... and a rank that crashes says so itself, then dies of the signal.
launch_two NPROXY_RUN_CRASH=1:3 crash
if ((rc0 == 4 && rc1 == 128 + 7)) &&
   grep -Eq "^nproxy-run: process 1 \(pid [0-9]+\): killed by signal SIGBUS at address 0x[0-9a-f]+ during allgather 4096 B$" "$tmp/crash.1"; then
	tap_ok "launched, SIGBUS: the rank reports signal, address and phase, and dies of it"
else
	tap_fail "launched, SIGBUS: the rank reports it and dies of it" "exit $rc0 / $rc1" "$(cat "$tmp"/crash.*)"
fi

# ---- timeout: the device reaches the net stage only after 5 s, --timeout 2
mark=timeout-$$
start=$SECONDS
out=$(NPROXY_TEST_MARK=$mark timeout 60 "$RUN" --procs 2 --size 4K --iters 2 --warmup 0 \
	--device-delay-us 5000000 --timeout 2 2>&1)
rc=$?
took=$((SECONDS - start))
# Both devices stall: the supervisor stops the ranks at --timeout and names
# them from the hang-report snapshot.  On a loaded host setup may use up the
# 2 s before the first op starts: then no task is there to blame, and the
# message lists the ranks still running and where each was, also exit 3.
if ((rc == 3)) && ((took < 20)) &&
   { grep -Eq "^nproxy-run: timeout after 2 s: rank [01] \(pid [0-9]+\) stalled: task NETWORK of op 1 in WAITING_DEVICE_TRIGGER .*DELAY 5\.000 s" <<<"$out" ||
     grep -Eq "^nproxy-run: timeout after 2 s: still running: rank [01] \(pid [0-9]+\) \(" <<<"$out"; }; then
	tap_ok "device never triggers: exit 3 after ${took} s, rank named"
else
	tap_fail "device never triggers: exit 3" "exit $rc after $took s" "$out"
fi
no_leftovers "timeout: no rank left running" "$mark"
tap_done
