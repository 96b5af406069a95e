#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The installed bash completion: nproxy-run completes its options (read from
# its --help) and their values; nproxyctl its subcommands (from `nproxyctl
# help`), sem's operations and a subcommand's options (from its --help).
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
build=${NPROXY_BUILD:-$top/build}
[[ -x $build/bin/nproxy-run && -x $build/bin/nproxyctl ]] || tap_skip_all "tools not built (make -C tools)"

# complete_line FILE WORD...: COMPREPLY for the last word, space-separated.
complete_line() {
	local file=$1
	shift
	bash -c '
		. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		fn=$(complete -p "${COMP_WORDS[0]##*/}" 2>/dev/null | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
		[[ -n $fn ]] || { echo "no completion registered"; exit 1; }
		COMP_WORDS[0]=$BIN
		"$fn"
		echo "${COMPREPLY[*]}"' _ "$file" "$@"
}

tap_plan 5
out=$(BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --hand)
if [[ $out == "--handshake" ]]; then tap_ok "nproxy-run --hand<TAB>: --handshake"
else tap_fail "nproxy-run --hand<TAB>" "got: $out"; fi
out=$(BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --handshake "")
if [[ $out == "auto kmod memfd" ]]; then tap_ok "nproxy-run --handshake <TAB>: auto kmod memfd"
else tap_fail "nproxy-run --handshake <TAB>" "got: $out"; fi
out=$(BIN=$build/bin/nproxyctl complete_line "$top/dist/nproxyctl.bash-completion" nproxyctl s)
if [[ $out == "sem shm-sweep state stats" ]]; then tap_ok "nproxyctl s<TAB>: sem shm-sweep state stats"
else tap_fail "nproxyctl s<TAB>" "got: $out"; fi
out=$(BIN=$build/bin/nproxyctl complete_line "$top/dist/nproxyctl.bash-completion" nproxyctl --json sem "")
if [[ $out == "get set inc" ]]; then tap_ok "nproxyctl --json sem <TAB>: get set inc"
else tap_fail "nproxyctl --json sem <TAB>" "got: $out"; fi
out=$(BIN=$build/bin/nproxyctl complete_line "$top/dist/nproxyctl.bash-completion" nproxyctl watch --)
if [[ " $out " == *" --count "* && " $out " == *" --timeout "* ]]; then tap_ok "nproxyctl watch --<TAB>: $out"
else tap_fail "nproxyctl watch --<TAB>" "got: $out"; fi
tap_done
