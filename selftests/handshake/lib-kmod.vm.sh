#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Inside scripts/vmtest, with nproxy.ko loaded: run every test program of
# the library areas that open handshake regions (handshake, proxy, common)
# again with NPROXY_HANDSHAKE=kmod, so each test written against the
# automatic handshake backend also runs on the module's pages (on the host
# the same binaries ran on the memfd backend).
#
# Re-emits the programs' kselftest TAP as one TAP stream: every result line
# renumbered and prefixed with its program's name, everything else as "#"
# diagnostics, one plan at the end.  A program that crashes, times out,
# prints fewer results than its plan or exits non-zero without a failed
# result adds a failure; one that skips as a whole adds a skip.
#
# Environment: NPROXY_BUILD (build tree; default: the one this script was
# installed into), LIB_KMOD_TIMEOUT (seconds per program, default 240).
tap_sh=${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh
if [[ ! -r $tap_sh ]]; then
	printf 'TAP version 13\n1..1\nnot ok 1 lib-kmod: cannot read %s (set NPROXY_TOP)\n' "$tap_sh"
	exit 1
fi
. "$tap_sh"

build=${NPROXY_BUILD:-$(cd "$(dirname "$0")/../.." && pwd -P)}
areas=(handshake proxy common)
per_prog_timeout=${LIB_KMOD_TIMEOUT:-240}

[[ -e /dev/nproxy ]] || tap_skip_all "no /dev/nproxy: nproxy.ko not loaded (run: scripts/run-tests --vm $build/selftests/vm)"
for a in "${areas[@]}"; do
	[[ -d $build/selftests/$a ]] ||
		tap_skip_all "no $build/selftests/$a: build the selftests first (make selftests)"
done
tap_require_cmd timeout

out=$(mktemp "${TMPDIR:-/tmp}/lib-kmod.XXXXXX") || tap_skip_all "cannot create a temporary file"
trap 'rm -f "$out"' EXIT

# relay NAME RC: re-emit the TAP in $out under NAME.
relay() {
	local name=$1 rc=$2 line rest desc plan= results=0 failed=0 skip_reason= running=
	while IFS= read -r line || [[ -n $line ]]; do
		line=${line%$'\r'}
		case $line in
		"ok "[0-9]* | "not ok "[0-9]*)
			results=$((results + 1))
			rest=
			[[ $line =~ ^(not )?ok\ [0-9]+\ ?(.*)$ ]] && rest=${BASH_REMATCH[2]}
			desc=${rest%%#*}
			desc=${desc% }
			# The harness names no test on a SKIP line: use the RUN line's.
			desc=${desc:-${running:-result $results}}
			if [[ $rest =~ \#[[:space:]]*(SKIP|skip|Skip)[[:space:]]*(.*)$ ]]; then
				tap_skip "$name: $desc" "${BASH_REMATCH[2]}"
			elif [[ $line == ok* ]]; then
				tap_ok "$name: $desc"
			else
				tap_fail "$name: $desc"
				failed=$((failed + 1))
			fi ;;
		1..[0-9]*)
			[[ -z $plan ]] && plan=${line#1..} && plan=${plan%%[!0-9]*}
			[[ $line =~ SKIP[[:space:]]*(.*)$ ]] && skip_reason=${BASH_REMATCH[1]} ;;
		"TAP version"*) ;;
		"#  RUN "*)
			running=${line#\#  RUN }
			running=${running#"${running%%[! ]*}"}
			running=${running%% *}
			printf '# | %s\n' "$line" ;;
		# Indented, so a program's "# Totals" never reads as ours.
		*) printf '# | %s\n' "$line" ;;
		esac
	done <"$out"

	if ((rc == 124 || rc == 137)); then
		tap_fail "$name: timed out after ${per_prog_timeout}s"
		return
	fi
	if ((results == 0)); then
		if ((rc == 4 || (rc == 0 && ${plan:-1} == 0))); then
			tap_skip "$name" "${skip_reason:-skipped as a whole}"
		else
			tap_fail "$name: printed no TAP results (exit status $rc)"
		fi
		return
	fi
	while ((${plan:-0} > results)); do
		results=$((results + 1))
		tap_fail "$name: result $results of $plan missing (exit status $rc)"
		failed=$((failed + 1))
	done
	if ((rc != 0 && rc != 4 && failed == 0)); then
		tap_fail "$name: exit status $rc without a failed test"
	fi
}

found=0
for a in "${areas[@]}"; do
	for prog in "$build/selftests/$a"/*; do
		[[ -f $prog && -x $prog ]] || continue
		found=1
		name=$a/${prog##*/}
		echo "# ==== $name (NPROXY_HANDSHAKE=kmod)"
		(cd "${prog%/*}" && NPROXY_HANDSHAKE=kmod exec timeout -k 10 "$per_prog_timeout" "$prog") \
			</dev/null >"$out" 2>&1
		relay "$name" $?
	done
done
((found)) || tap_skip_all "no test programs in $build/selftests/ (${areas[*]})"
tap_done
