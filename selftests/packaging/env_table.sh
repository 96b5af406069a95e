#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Every environment variable the library and the tools read is in the
# README's runtime table, and every one the library reads is in
# libnproxy(3), and every one nproxy-run reads in nproxy-run(1), so the
# documentation cannot fall behind the code.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
cd "$top" || tap_skip_all "no source tree at $top"

# Names passed to getenv() or to the files' env helpers, #define'd as one,
# or listed alone on a line (a table of alternatives).
names_in() {
	cat "$@" | grep -oE '(getenv|env_[a-z0-9_]+|spin_ns_from_env)\("[A-Z][A-Z0-9_]+"' | grep -oE '"[A-Z0-9_]+"'
	cat "$@" | grep -oE '^#define [A-Z_]*ENV[[:space:]]+"[A-Z][A-Z0-9_]+"' | grep -oE '"[A-Z0-9_]+"'
	cat "$@" | grep -oE '^[[:space:]]+"(NPROXY|NEURON)_[A-Z0-9_]+",[[:space:]]*$' | grep -oE '"[A-Z0-9_]+"'
}
mapfile -t lib_vars < <(names_in lib/*/*.c lib/*/*.h | tr -d '"' | sort -u)
mapfile -t tool_vars < <(names_in tools/*.c | tr -d '"' | sort -u)
mapfile -t run_vars < <(names_in tools/run_*.c tools/nproxy-run.c | tr -d '"' | sort -u)
((${#lib_vars[@]} > 5)) || tap_skip_all "found only ${#lib_vars[@]} variables in lib/: the scan is broken"

tap_plan 3
readme=$(sed -n '/^Runtime: every variable/,/^## /p' README.md)
missing=()
for v in "${lib_vars[@]}" "${tool_vars[@]}"; do
	grep -q -- "\`$v\`\|$v\`\|\`$v" <<<"$readme" || missing+=("$v")
done
if ((${#missing[@]} == 0)); then
	tap_ok "README's runtime table lists all $(printf '%s\n' "${lib_vars[@]}" "${tool_vars[@]}" | sort -u | wc -l) variables"
else
	tap_fail "README's runtime table lists every variable" "missing: ${missing[*]}"
fi
man=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH SEE ALSO/p' Documentation/man/libnproxy.3 | sed 's/\\-/-/g')
missing=()
for v in "${lib_vars[@]}"; do
	[[ $v == FI_* ]] && [[ $man == *FI_PROVIDER* ]] && continue
	grep -q -- "$v" <<<"$man" || missing+=("$v")
done
if ((${#missing[@]} == 0)); then tap_ok "libnproxy(3) ENVIRONMENT lists the library's ${#lib_vars[@]} variables"
else tap_fail "libnproxy(3) ENVIRONMENT lists every library variable" "missing: ${missing[*]}"; fi
man=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH EXAMPLES/p' Documentation/man/nproxy-run.1 | sed 's/\\-/-/g')
missing=()
for v in "${run_vars[@]}"; do
	# A family may be written once: "OMPI_COMM_WORLD_RANK, _SIZE".
	grep -q -- "$v" <<<"$man" || { grep -q -- "${v%_*}_" <<<"$man" && grep -q -- " _${v##*_}" <<<"$man"; } ||
		missing+=("$v")
done
if ((${#missing[@]} == 0)); then tap_ok "nproxy-run(1) ENVIRONMENT lists the ${#run_vars[@]} variables nproxy-run reads"
else tap_fail "nproxy-run(1) ENVIRONMENT lists every variable nproxy-run reads" "missing: ${missing[*]}"; fi
tap_done
