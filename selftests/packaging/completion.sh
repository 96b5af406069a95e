#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The installed bash completion: nproxy-run completes its options (read from
# its --help) and their values, --provider only the providers it can open
# (fi_info's reliable-datagram tagged ones, tcp;ofi_rxm quoted, no psm2 or
# hook providers); nproxyctl its subcommands (from `nproxyctl help`), sem's
# operations and a subcommand's options (from its --help).
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

tap_plan 7
out=$(BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --hand)
if [[ $out == "--handshake" ]]; then tap_ok "nproxy-run --hand<TAB>: --handshake"
else tap_fail "nproxy-run --hand<TAB>" "got: $out"; fi
out=$(BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --handshake "")
if [[ $out == "auto kmod memfd" ]]; then tap_ok "nproxy-run --handshake <TAB>: auto kmod memfd"
else tap_fail "nproxy-run --handshake <TAB>" "got: $out"; fi
# A host whose libfabric lists psm2 and hook providers it cannot open for
# nproxy-run: a stand-in fi_info answering as libfabric 1.17 does here.
fake=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-compl.XXXXXX") || tap_skip_all "no temp dir"
trap 'rm -rf "$fake"' EXIT
cat >"$fake/fi_info" <<'SH'
#!/bin/sh
case " $* " in
*" -t FI_EP_RDM "*) printf 'provider: tcp;ofi_rxm\n    fabric: 127.0.0.0/8\nprovider: shm\n    fabric: shm\nprovider: tcp;ofi_rxm\n' ;;
*) printf 'psm2:\n    version: 117.0\nshm:\n    version: 117.0\ntcp:\n    version: 117.0\nofi_rxm:\n    version: 117.0\nofi_hook_perf:\n    version: 117.0\n' ;;
esac
SH
chmod +x "$fake/fi_info"
out=$(PATH=$fake:$PATH BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --provider "")
if [[ $out == 'shm tcp\;ofi_rxm' ]]; then tap_ok "nproxy-run --provider <TAB>: shm tcp\;ofi_rxm (no psm2, no hook providers)"
else tap_fail "nproxy-run --provider <TAB>: what nproxy-run accepts" "got: $out"; fi
out=$(PATH=$fake:$PATH BIN=$build/bin/nproxy-run complete_line "$top/dist/nproxy-run.bash-completion" nproxy-run --provider t)
if [[ $out == 'tcp\;ofi_rxm' ]]; then tap_ok "nproxy-run --provider t<TAB>: tcp\;ofi_rxm"
else tap_fail "nproxy-run --provider t<TAB>" "got: $out"; fi

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
