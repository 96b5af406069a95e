# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# TAP helpers for shell selftests, in the kselftest format that
# scripts/run-tests counts (results at column 0):
#
#   #!/bin/bash
#   . "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
#   tap_require_root
#   tap_require_cmd ip
#   tap_plan 3
#   tap_check "lo is up" ip link show lo up
#   tap_expect "bad flag refused" 2 "unknown option" "$RUN" --bogus
#   if cond; then tap_ok "thing works"; else tap_fail "thing works" "why"; fi
#   tap_skip "needs a NIC" "no eth0 in the namespace"
#   tap_done
#
# A test of the built tools starts with tap_use_build (BUILD, TOP, RUN, CTL;
# skips when a tool it names is not built) and tap_tmpdir (a private $tmp
# removed at exit; tap_tmpdir_job also ends a background job), see below.
#
# run-tests exports NPROXY_TOP (repo root) and NPROXY_BUILD (the build tree,
# e.g. build/ or build-asan/).  Exit status follows kselftest: 0 all passed,
# 1 something failed, 4 everything skipped.

TAP_N=0
TAP_PASS=0
TAP_FAIL=0
TAP_SKIP=0
TAP_PLANNED=

echo "TAP version 13"

# tap_diag MSG...: each argument, line by line, as "# " diagnostics.
tap_diag() {
	local arg line
	for arg in "$@"; do
		[[ -n $arg ]] || continue
		while IFS= read -r line; do
			printf '# %s\n' "$line"
		done <<<"$arg"
	done
}

tap_plan() {
	TAP_PLANNED=$1
	echo "1..$1"
}

tap_ok() {
	TAP_N=$((TAP_N + 1)); TAP_PASS=$((TAP_PASS + 1))
	echo "ok $TAP_N $1"
}

# tap_fail DESC [DIAGNOSTIC...]
tap_fail() {
	local desc=$1; shift
	TAP_N=$((TAP_N + 1)); TAP_FAIL=$((TAP_FAIL + 1))
	(($#)) && tap_diag "$@"
	echo "not ok $TAP_N $desc"
}

# tap_skip DESC REASON
tap_skip() {
	TAP_N=$((TAP_N + 1)); TAP_SKIP=$((TAP_SKIP + 1))
	echo "ok $TAP_N $1 # SKIP ${2:-no reason given}"
}

# tap_check DESC CMD [ARGS...]: one result from a command's exit status;
# its output is shown as diagnostics when it fails.
tap_check() {
	local desc=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	if ((rc == 0)); then
		tap_ok "$desc"
	else
		tap_fail "$desc" "command: $*" "exit status $rc" "$out"
	fi
	return $rc
}

# tap_expect DESC STATUS REGEX CMD [ARGS...]: one result: the command exits
# STATUS and its output (stderr and stdout together) matches the extended
# REGEX; else the command, its status and its output as diagnostics.  The
# output and status stay in $out and $rc for further checks.
tap_expect() {
	local desc=$1 want=$2 re=$3
	shift 3
	out=$("$@" 2>&1)
	rc=$?
	if ((rc == want)) && grep -Eq -- "$re" <<<"$out"; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "command: $*" "exit $rc (want $want), output must match /$re/:" "$out"
	fi
}

# tap_skip_all REASON: the whole program is skipped (exit 4).
tap_skip_all() {
	echo "1..0 # SKIP $1"
	exit 4
}

tap_require_root() {
	[[ $(id -u) == 0 ]] || tap_skip_all "needs root"
}

tap_require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || tap_skip_all "needs '$c' (see scripts/packages.txt)"
	done
}

# tap_use_build [TOOL...]: for a test of the built tree, sourced as
#   . "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
# Sets BUILD (NPROXY_BUILD, or the build tree the test is installed in,
# BUILD/selftests/AREA/), TOP (NPROXY_TOP, or BUILD/..), and RUN and CTL
# (the built nproxy-run and nproxyctl).  The whole program skips unless
# every TOOL named (nproxy-run, nproxyctl) is built.
tap_use_build() {
	local here tool missing=()
	here=$(cd "$(dirname "$0")" && pwd -P)
	BUILD=${NPROXY_BUILD:-$(cd "$here/../.." && pwd -P)}
	TOP=${NPROXY_TOP:-$(cd "$BUILD/.." && pwd -P)}
	RUN=$BUILD/bin/nproxy-run
	CTL=$BUILD/bin/nproxyctl
	for tool; do
		[[ -x $BUILD/bin/$tool ]] || missing+=("$tool")
	done
	((${#missing[@]} == 0)) || tap_skip_all "${missing[*]} not built in $BUILD/bin (make tools)"
}

# tap_tmpdir: a private directory in $tmp, removed when the program exits.
# A test that sets its own EXIT trap afterwards removes $tmp there.
tap_tmpdir() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-test.XXXXXX") ||
		tap_skip_all "cannot create a temporary directory"
	trap 'rm -rf "$tmp"' EXIT
}

# tap_tmpdir_job SIGNAL VAR: as tap_tmpdir, and at exit the background job
# whose pid the test keeps in the variable VAR (empty once it has ended) is
# sent SIGNAL and reaped before $tmp is removed.
tap_tmpdir_job() {
	tap_tmpdir
	# shellcheck disable=SC2064 # the signal and the name are fixed now
	trap "tap_end_job $1 $2; rm -rf \"\$tmp\"" EXIT
}

tap_end_job() {
	local pid=${!2}
	[[ -n $pid ]] && kill -"$1" "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
}

# tap_done: print the plan if none was given, a kselftest-style totals
# line, and exit with the kselftest status.
tap_done() {
	[[ -n $TAP_PLANNED ]] || echo "1..$TAP_N"
	if [[ -n $TAP_PLANNED && $TAP_PLANNED != "$TAP_N" ]]; then
		tap_diag "planned $TAP_PLANNED tests but ran $TAP_N"
		TAP_FAIL=$((TAP_FAIL + 1))
	fi
	echo "# Totals: pass:$TAP_PASS fail:$TAP_FAIL xfail:0 xpass:0 skip:$TAP_SKIP error:0"
	((TAP_FAIL == 0)) || exit 1
	((TAP_PASS == 0 && TAP_SKIP > 0)) && exit 4
	exit 0
}
