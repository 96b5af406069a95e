#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A dead rank never poisons a later job.  libfabric's shm provider keeps
# each endpoint in /dev/shm/<pid>:<uid>:<n>; a rank killed by SIGKILL
# leaves it, and once PIDs wrap a later process with that PID dies of
# SIGBUS (short file) or fails fi_enable with EBUSY unless the file is
# gone.  Here:
#   - nproxyctl shm-sweep: a dry run removes nothing; the sweep removes a
#     dead PID's file and never a live PID's, nor one a live process holds;
#   - short stale files at the next PIDs (where the next ranks land): the
#     job runs, each rank removing the one at its own name (sweep off), and
#     with the default sweep at open;
#   - a rank SIGKILLed mid-run: its files are gone after the job, and the
#     next job runs.
# Everything the test plants is removed at exit (and planted stale files at
# the next PIDs exist for about a second: other jobs starting then might
# meet them too, so the range is kept small).
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run nproxyctl
tap_require_cmd python3 timeout
[[ -d /dev/shm && -w /dev/shm ]] || tap_skip_all "/dev/shm is not writable"

tmp=$(mktemp -d)
planted=$tmp/planted
: >"$planted"
holder=
cleanup() {
	[[ -n $holder ]] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
	xargs -r rm -f <"$planted"
	rm -rf "$tmp"
}
trap cleanup EXIT
export NPROXY_HANDSHAKE=memfd
uid=$(id -u)
pid_max=$(cat /proc/sys/kernel/pid_max)

# plant NAME [SIZE]: a file in /dev/shm that this test owns and removes.
plant() {
	[[ -e /dev/shm/$1 ]] && return 1
	: >"/dev/shm/$1" || return 1
	echo "/dev/shm/$1" >>"$planted"
}

# A PID that exists no more: a reaped child's.
dead_pid() {
	sh -c 'echo $$'
}

tap_plan 7

# ---- nproxyctl shm-sweep
dead=$(dead_pid)
held=$(dead_pid)
plant "$dead:$uid:0"
plant "$dead:$uid:1"
plant "$held:$uid:0"
plant "$$:$uid:7"		# a live PID's (ours)
# A live process keeps the dead PID's file open: it stays.
sleep 120 3<"/dev/shm/$held:$uid:0" &
holder=$!

out=$("$CTL" shm-sweep --dry-run 2>&1)
rc=$?
if ((rc == 0)) && grep -q "^would remove /dev/shm/$dead:$uid:0 (pid $dead is gone)$" <<<"$out" &&
   [[ -e /dev/shm/$dead:$uid:0 && -e /dev/shm/$dead:$uid:1 ]] &&
   ! grep -q "/dev/shm/$$:" <<<"$out"; then
	tap_ok "shm-sweep --dry-run lists a dead PID's regions and removes nothing"
else
	tap_fail "shm-sweep --dry-run lists a dead PID's regions and removes nothing" "exit $rc" "$out"
fi

"$CTL" --json shm-sweep >"$tmp/sweep.json" 2>"$tmp/sweep.err"
rc=$?
if ((rc == 0)) && python3 - "$tmp/sweep.json" "$dead" "$held" "$uid" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
dead, held, uid = sys.argv[2], sys.argv[3], sys.argv[4]
files = {f["path"]: f for f in d["files"]}
assert d["dry_run"] is False and d["removed"] >= 2, d
for n in (0, 1):
    assert files["/dev/shm/%s:%s:%d" % (dead, uid, n)]["verdict"] == "removed", files
h = files["/dev/shm/%s:%s:0" % (held, uid)]
assert h["verdict"] == "kept (in use)" and h["used_by"] > 0, h
PY
then
	tap_ok "shm-sweep --json: the dead PID's regions removed, a held one kept and its user named"
else
	tap_fail "shm-sweep --json" "exit $rc" "$(cat "$tmp/sweep.json" "$tmp/sweep.err")"
fi
if [[ ! -e /dev/shm/$dead:$uid:0 && ! -e /dev/shm/$dead:$uid:1 && -e /dev/shm/$$:$uid:7 &&
      -e /dev/shm/$held:$uid:0 ]]; then
	tap_ok "after the sweep: a live PID's file and a held file are still there"
else
	tap_fail "after the sweep: a live PID's file and a held file are still there" \
		"$(ls -l /dev/shm/ 2>&1 | grep -E ":$uid:" )"
fi
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
holder=

# ---- short stale files where the next ranks will land
# plant_next N: an empty file at <pid>:<uid>:0 for the next N PIDs.
plant_next() {
	local next=$(($(cat /proc/sys/kernel/ns_last_pid) + 1)) i p
	for ((i = 0; i < $1; i++)); do
		p=$(((next + i) % pid_max))
		((p > 300)) || continue
		plant "$p:$uid:0" 2>/dev/null
	done
}

plant_next 200
out=$(NPROXY_NET_SHM_SWEEP=0 timeout 120 "$RUN" --procs 2 --size 4K --iters 3 --warmup 1 --timeout 90 2>&1)
rc=$?
hits=$(grep -c "removed /dev/shm/[0-9]*:$uid:0, left by a dead process that had our pid" <<<"$out")
if ((rc == 0 && hits >= 1)); then
	tap_ok "stale files at the ranks' own names (sweep off): the job runs, $hits rank(s) removed theirs"
elif ((rc == 0)); then
	tap_skip "stale files at the ranks' own names" "the ranks' PIDs were not among the 200 planted (busy host)"
else
	tap_fail "stale files at the ranks' own names (sweep off): the job runs" "exit $rc" "$out"
fi
xargs -r rm -f <"$planted"
: >"$planted"

plant_next 200
tap_check "stale files at the next PIDs, default sweep at open: a 4-rank job runs" \
	timeout 120 "$RUN" --procs 4 --size 4K --iters 3 --warmup 1 --timeout 90
xargs -r rm -f <"$planted"
: >"$planted"

# ---- a rank SIGKILLed mid-run leaves nothing for the next job
out=$(NPROXY_RUN_KILL=1:3 timeout 120 "$RUN" --procs 2 --size 4K --iters 20 --warmup 1 --timeout 90 2>&1)
rc=$?
victim=$(sed -nE 's/^nproxy-run: rank 1 \(pid ([0-9]+)\) was killed by signal SIGKILL.*/\1/p' <<<"$out")
left=
[[ -n $victim ]] && left=$(ls /dev/shm/ | grep -E "^$victim:" )
if ((rc == 4)) && [[ -n $victim && -z $left ]]; then
	tap_ok "killed rank (pid $victim): its shm regions are gone after the job"
else
	tap_fail "killed rank: its shm regions are gone after the job" "exit $rc, victim '$victim', left: $left" "$out"
fi
tap_check "the next job after the killed one runs" \
	timeout 120 "$RUN" --procs 2 --size 4K --iters 3 --warmup 1 --timeout 90
tap_done
