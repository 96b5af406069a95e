#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxyctl hang-report reads proxy-state pages that any process of a job
# can write: every field it loops over is bounded.  A job hangs (rank 1's
# device program waits on a semaphore nobody adds to), then rank 1's
# page claims n_ranks = 0xFFFFFFFF; the report still names rank 1 within
# its usual timeout and says the claim was ignored, instead of looping
# over four billion ranks per stuck task.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run nproxyctl
tap_require_cmd python3 timeout
export NPROXY_HANDSHAKE=memfd
((EUID == 0)) || tap_skip_all "hang-report reads other processes' fds (pidfd_getfd): needs root"

job=
tap_tmpdir_job TERM job

NPROXY_RUN_HANG=1:2:sem "$RUN" --procs 2 --size 4K --iters 200 --warmup 0 --timeout 90 \
	>"$tmp/job.out" 2>&1 &
job=$!
found=
for ((i = 0; i < 120; i++)); do
	timeout 20 "$CTL" hang-report --min-age 1 --pid "$job" >"$tmp/report" 2>&1
	(($? == 5)) && { found=1; break; }
	kill -0 "$job" 2>/dev/null || break
	sleep 0.5
done
if [[ -z $found ]]; then
	tap_fail "the job hangs and hang-report finds it" "$(cat "$tmp/report" "$tmp/job.out")"
	tap_done
	exit
fi
p1=$(timeout 20 "$CTL" --json top --count 1 --pid "$job" |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print([p["pid"] for p in d["proxies"] if p["rank"]==1][0])')

# n_ranks is the 7th __u32 of struct nproxy_proxy_state (the 4th page).
if python3 - "$p1" <<'PY'
import mmap, os, struct, sys
pid = sys.argv[1]
page = os.sysconf("SC_PAGE_SIZE")
d = "/proc/%s/fd" % pid
for fd in os.listdir(d):
    if os.readlink(os.path.join(d, fd)).startswith("/memfd:nproxy-hs-"):
        f = os.open(os.path.join(d, fd), os.O_RDWR)
        m = mmap.mmap(f, page, mmap.MAP_SHARED, offset=3 * page)
        struct.pack_into("<I", m, 24, 0xFFFFFFFF)
        m.close()
        os.close(f)
        sys.exit(0)
sys.exit(1)
PY
then
	start=$SECONDS
	# -k: the loop does not stop at SIGTERM (nproxyctl handles it).
	timeout -k 5 20 "$CTL" hang-report --min-age 1 --pid "$job" >"$tmp/report" 2>&1
	rc=$?
	if ((rc == 5)) && grep -q "ignored" "$tmp/report" &&
	   grep -q "^rank 1 (pid $p1) task NETWORK in WAITING_DEVICE_TRIGGER" "$tmp/report"; then
		tap_ok "n_ranks 0xFFFFFFFF in a page: the claim is ignored, rank 1 still named ($((SECONDS - start)) s)"
	else
		tap_fail "n_ranks 0xFFFFFFFF in a page: bounded report" "exit $rc (124: still looping after 20 s)" "$(cat "$tmp/report")"
	fi
else
	tap_fail "n_ranks 0xFFFFFFFF in a page: rank 1's memfd found and written" "pid $p1"
fi
tap_done
