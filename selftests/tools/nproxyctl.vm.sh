#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxyctl against the real module (inside the VM, nproxy.ko loaded):
# every subcommand, its --json form, region naming (ID and PID:FD), the
# device-program text format end to end, the event stream, permission and
# bad-input errors, and nproxy-run over the kmod handshake.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build

tap_require_root
tap_require_cmd python3 timeout
[[ -x $CTL ]] || tap_skip_all "$CTL not built (make -C tools)"
[[ -e /dev/nproxy ]] || tap_skip_all "/dev/nproxy missing: nproxy.ko not loaded (run under scripts/vmtest)"

tmp=$(mktemp -d)
holder=
watcher=
cleanup() {
	[[ -n $holder ]] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
	[[ -n $watcher ]] && kill "$watcher" 2>/dev/null && wait "$watcher" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# json_check FILE PYTHON-EXPR: the file parses as JSON (d) and EXPR holds.
json_check() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}

# ---- info
tap_check "info" "$CTL" info
"$CTL" --json info >"$tmp/info.json"
if json_check "$tmp/info.json" 'd["abi_version"] == 1 and d["max_streams"] == 4 and d["max_sems"] == 256 and d["page_size"] >= 4096'; then
	tap_ok "info --json: abi 1, limits"
else
	tap_fail "info --json: abi 1, limits" "$(cat "$tmp/info.json")"
fi

# ---- watch in the background, from before the region exists
timeout 300 "$CTL" --json watch --timeout 240 >"$tmp/events.jsonl" 2>"$tmp/watch.err" &
watcher=$!
sleep 1

# ---- create: a region held by a background process
"$CTL" --json create --streams 2 --sems 8 --rank 5 --gid 3 >"$tmp/create.json" 2>"$tmp/create.err" &
holder=$!
for _ in $(seq 100); do [[ -s $tmp/create.json ]] && break; sleep 0.1; done
if json_check "$tmp/create.json" 'd["region_id"] > 0 and d["pid"] > 0'; then
	tap_ok "create: region held by pid $holder"
else
	tap_fail "create: region held by pid $holder" "$(cat "$tmp/create.json" "$tmp/create.err")"
	tap_done
fi
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["region_id"])' "$tmp/create.json")
fd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fd"])' "$tmp/create.json")

# ---- regions (netlink dump)
"$CTL" --json regions >"$tmp/regions.json"
if json_check "$tmp/regions.json" "any(r['region_id'] == $id and r['owner_pid'] == $holder and r['rank'] == 5 and r['gid'] == 3 and r['n_streams'] == 2 and r['n_sems'] == 8 for r in d)"; then
	tap_ok "regions --json lists region $id with owner, rank, gid, sizes"
else
	tap_fail "regions --json lists region $id" "$(cat "$tmp/regions.json")"
fi
out=$("$CTL" regions)
if grep -q "region_id=$id " <<<"$out"; then tap_ok "regions (text)"; else tap_fail "regions (text)" "$out"; fi

# ---- trigger + state, by ID and by PID:FD
tap_check "trigger $id 1 7" "$CTL" trigger "$id" 1 7
"$CTL" --json state "$holder:$fd" >"$tmp/state.json"
if json_check "$tmp/state.json" "d['region_id'] == $id and d['triggers'] == [0xffffffff, 7] and d['triggers_written'] >= 1"; then
	tap_ok "state PID:FD shows trigger[1] == 7, trigger[0] still the sentinel"
else
	tap_fail "state PID:FD shows trigger[1] == 7" "$(cat "$tmp/state.json")"
fi

# ---- sem get/set/inc
"$CTL" sem set "$id" 3 5 && "$CTL" sem inc "$id" 3 2
v=$("$CTL" sem get "$id" 3)
if [[ $v == 7 ]]; then tap_ok "sem set 5, inc 2, get == 7"; else tap_fail "sem set 5, inc 2, get == 7" "got '$v'"; fi
"$CTL" --json sem get "$id" 3 >"$tmp/sem.json"
if json_check "$tmp/sem.json" "d == {'region_id': $id, 'sem': 3, 'value': 7}"; then
	tap_ok "sem get --json"
else
	tap_fail "sem get --json" "$(cat "$tmp/sem.json")"
fi

# ---- program: every step kind, end to end
cat >"$tmp/prog.txt" <<'PROG'
# the device reaches the net stage, then waits for the host
delay 50us
write-trigger 0 1
inc-sem 1 1        # the host's completion, played by the program itself
wait-sem 1 >= 1 timeout 100ms
signal 42
PROG
"$CTL" --json program "$id" "$tmp/prog.txt" >"$tmp/prog.json" 2>"$tmp/prog.err"
rc=$?
if ((rc == 0)) && json_check "$tmp/prog.json" "d['state'] == 'done' and d['steps_done'] == 5 and d['error'] == 0"; then
	tap_ok "program: 5 steps done"
else
	tap_fail "program: 5 steps done" "exit $rc" "$(cat "$tmp/prog.json" "$tmp/prog.err")"
fi
v=$("$CTL" sem get "$id" 1)
"$CTL" --json state "$id" >"$tmp/state2.json"
if [[ $v == 1 ]] && json_check "$tmp/state2.json" "d['triggers'][0] == 1 and d['events_signalled'] >= 1 and d['prog_state'] == 'none'"; then
	tap_ok "program effects: sem 1 == 1, trigger 0 == 1, event signalled, result collected"
else
	tap_fail "program effects" "sem1=$v" "$(cat "$tmp/state2.json")"
fi

# A WAIT_SEM that cannot be met: the program times out, exit 1, step named.
printf 'wait-sem 2 >= 1 timeout 10ms\n' >"$tmp/wait.txt"
tap_expect "program: unmet wait-sem times out (exit 1)" 1 "timedout" "$CTL" program "$id" "$tmp/wait.txt"

# Index beyond the region's semaphores: the module refuses, message says why.
printf 'inc-sem 100 1\n' >"$tmp/bad.txt"
tap_expect "program: semaphore beyond n_sems rejected" 1 "rejected" "$CTL" program "$id" "$tmp/bad.txt"

# Parse error: exit 2, FILE:LINE in the message, nothing submitted.
printf 'delay 1us\nwait-sem 1 > 3\n' >"$tmp/syntax.txt"
tap_expect "program: syntax error names file and line" 2 "syntax.txt:2:" \
	"$CTL" program "$id" "$tmp/syntax.txt"

# ---- stats
"$CTL" --json stats >"$tmp/stats.json"
if json_check "$tmp/stats.json" 'd["progs_run"] >= 2 and d["regions_live"] >= 1 and d["triggers_written"] >= 2 and d["timeouts"] >= 1'; then
	tap_ok "stats --json counts programs, live regions, triggers, timeouts"
else
	tap_fail "stats --json" "$(cat "$tmp/stats.json")"
fi
tap_check "stats (text)" "$CTL" stats
if "$CTL" stats --reset >/dev/null && "$CTL" --json stats >"$tmp/stats2.json" &&
   json_check "$tmp/stats2.json" 'd["timeouts"] == 0 and d["regions_live"] >= 1'; then
	tap_ok "stats --reset zeroes resettable counters, keeps regions_live"
else
	tap_fail "stats --reset" "$(cat "$tmp/stats2.json" 2>/dev/null)"
fi

# ---- errors: unknown region, bad stream, permission
tap_expect "unknown region id: exit 1, says so" 1 "no such region" "$CTL" trigger 999999 0
tap_expect "stream beyond n_streams: exit 1, says so" 1 "stream 3 rejected \(region has 2 streams\)" \
	"$CTL" trigger "$id" 3
if command -v setpriv >/dev/null; then
	tap_expect "unprivileged info: exit 4, permission denied" 4 "permission denied" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" info
else
	tap_skip "unprivileged info" "no setpriv"
fi

# ---- the region goes away with its owner; watch saw it all
kill "$holder"; wait "$holder" 2>/dev/null; holder=
sleep 0.5
"$CTL" --json regions >"$tmp/regions2.json"
if json_check "$tmp/regions2.json" "not any(r['region_id'] == $id for r in d)"; then
	tap_ok "region $id gone after its owner exited"
else
	tap_fail "region $id gone after its owner exited" "$(cat "$tmp/regions2.json")"
fi
sleep 0.5
kill -INT "$watcher"; wait "$watcher"; wrc=$?; watcher=
if ((wrc == 0)) && python3 - "$tmp/events.jsonl" "$id" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
mine = [e["event"] for e in ev if e.get("region_id") == int(sys.argv[2])]
need = {"region-created", "trigger-written", "prog-done", "prog-timedout", "signal", "region-destroyed"}
missing = need - set(mine)
if missing:
    print("missing:", sorted(missing), "saw:", mine)
sys.exit(1 if missing else 0)
PY
then
	tap_ok "watch --json: created, trigger, prog-done, prog-timedout, signal, destroyed events; SIGINT exits 0"
else
	tap_fail "watch --json events" "exit $wrc" "$(cat "$tmp/events.jsonl" "$tmp/watch.err")"
fi

# ---- nproxy-run on the module's handshake pages
if [[ -x $RUN ]]; then
	out=$(timeout 240 "$RUN" --handshake kmod --procs 2 --size 4K -n 3 -w 1 --timeout 200 \
		--json 2>"$tmp/run.err")
	rc=$?
	if ((rc == 0)) && python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); sys.exit(0 if d["handshake"]=="kmod" and d["results"][0]["verified"] else 1)' <<<"$out"; then
		tap_ok "nproxy-run --handshake kmod: verified"
	else
		tap_fail "nproxy-run --handshake kmod" "exit $rc" "stdout: $out" "stderr: $(cat "$tmp/run.err")"
	fi
else
	tap_skip "nproxy-run --handshake kmod" "nproxy-run not built"
fi
tap_done
