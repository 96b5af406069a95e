#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/run-tests counts what kselftest-style programs report: passes,
# failures, skips, crashes, timeouts, missing TAP and short plans.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-rt.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT

# case NAME EXPECTED_LINE_REGEX SCRIPT: one fake test program in its own dir,
# run through run-tests; the per-program summary must match.
case_() {
	local name=$1 want=$2 body=$3 out rc
	mkdir -p "$work/$name"
	printf '#!/bin/bash\n%s\n' "$body" >"$work/$name/prog"
	chmod +x "$work/$name/prog"
	out=$(NPROXY_TEST_TIMEOUT=${T:-20} NPROXY_TEST_LOGDIR=$work/logs "$top/scripts/run-tests" "$work/$name" 2>&1)
	rc=$?
	if grep -qE "$want" <<<"$out"; then
		tap_ok "$name"
	else
		tap_fail "$name" "wanted: $want" "exit $rc, got:" "$out"
	fi
}

tap_plan 13
case_ pass '^# pass/prog: 2 passed, 0 failed, 0 skipped' \
	'echo "1..2"; echo "ok 1 a"; echo "ok 2 b"'
case_ fail '^# fail/prog: 1 passed, 1 failed, 0 skipped' \
	'echo "1..2"; echo "ok 1 a"; echo "not ok 2 b"; exit 1'
case_ skip_line '^# skip_line/prog: 1 passed, 0 failed, 1 skipped' \
	'echo "1..2"; echo "ok 1 a"; echo "ok 2 b # SKIP no device"'
case_ indented_ignored '^# indented_ignored/prog: 1 passed, 0 failed, 0 skipped' \
	'echo "1..1"; echo "  not ok 1 sub"; echo "# not ok 9 diag"; echo "ok 1 a"'
case_ exit4_no_tap '^# exit4_no_tap/prog: 0 passed, 0 failed, 1 skipped .*skipped: needs a unicorn' \
	'echo "needs a unicorn"; exit 4'
case_ skip_all_plan '^# skip_all_plan/prog: 0 passed, 0 failed, 1 skipped .*skipped: no module' \
	'echo "1..0 # SKIP no module"; exit 4'
case_ no_tap '^# no_tap/prog: 0 passed, 1 failed, 0 skipped .*no TAP' \
	'echo hello'
case_ crash '^# crash/prog: 1 passed, 2 failed, 0 skipped .*signal' \
	'echo "1..3"; echo "ok 1 a"; kill -SEGV $$'
case_ short_plan '^# short_plan/prog: 1 passed, 2 failed, 0 skipped .*plan 1..3' \
	'echo "1..3"; echo "ok 1 a"'
case_ bad_exit '^# bad_exit/prog: 1 passed, 1 failed, 0 skipped .*exit status 3' \
	'echo "1..1"; echo "ok 1 a"; exit 3'
T=2 case_ timeout '^# timeout/prog: 1 passed, 1 failed, 0 skipped .*timed out' \
	'echo "1..2"; echo "ok 1 a"; sleep 60 & sleep 60'

# The totals line sums programs and the exit status says whether any failed.
mkdir -p "$work/multi"
printf '#!/bin/sh\necho 1..1; echo ok 1 x\n' >"$work/multi/a"
printf '#!/bin/sh\necho 1..1; echo "not ok 1 y"; exit 1\n' >"$work/multi/b"
printf 'not executable\n' >"$work/multi/c"
chmod +x "$work/multi/a" "$work/multi/b"
out=$(NPROXY_TEST_LOGDIR=$work/logs "$top/scripts/run-tests" "$work/multi" 2>&1)
rc=$?
if [[ $rc == 1 ]] && grep -q '^run-tests: pass=1 fail=1 skip=0 programs=2$' <<<"$out"; then
	tap_ok "totals and exit status"
else
	tap_fail "totals and exit status" "exit $rc" "$out"
fi

# tap.sh itself: a helper-based script yields the kselftest shape.
printf '#!/bin/bash\n. %q/scripts/tap.sh\ntap_check yes true\ntap_check no false\ntap_skip maybe "not today"\ntap_done\n' \
	"$top" >"$work/taphelpers"
chmod +x "$work/taphelpers"
out=$("$work/taphelpers")
rc=$?
want=$'TAP version 13\nok 1 yes\n# command: false\n# exit status 1\nnot ok 2 no\nok 3 maybe # SKIP not today\n1..3'
if [[ $rc == 1 && $out == "$want"* ]]; then
	tap_ok "tap.sh helpers"
else
	tap_fail "tap.sh helpers" "exit $rc" "$out"
fi
tap_done
