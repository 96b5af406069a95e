#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/vmtest: the guest command's exit status comes back, a guest panic
# and the hard timeout fail with their own status and a clear message, and
# bad usage fails before booting anything.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}

[[ $(hostname) == vmtest ]] && tap_skip_all "already inside scripts/vmtest"
ls /boot/vmlinuz-6.1.0-*-amd64 >/dev/null 2>&1 || tap_skip_all "no /boot/vmlinuz-6.1.0-*-amd64 (scripts/deps.sh installs linux-image-amd64)"
tap_require_cmd qemu-system-x86_64

vmtest=$top/scripts/vmtest
tap_plan 5

out=$("$vmtest" 2>&1); rc=$?
if [[ $rc == 125 && $out == *"no command given"* ]]; then
	tap_ok "no command: usage error 125 without booting"
else
	tap_fail "no command: usage error 125 without booting" "exit $rc" "$out"
fi

out=$("$vmtest" --module /nonexistent/nproxy.ko -- true 2>&1); rc=$?
if [[ $rc == 125 && $out == *"not found"* ]]; then
	tap_ok "missing --module: error 125 without booting"
else
	tap_fail "missing --module: error 125 without booting" "exit $rc" "$out"
fi

out=$("$vmtest" -- sh -c 'grep -q "^Linux version 6\.1\." /proc/version && exit 3' 2>&1); rc=$?
if [[ $rc == 3 ]]; then
	tap_ok "the guest command's exit status (3) is vmtest's"
else
	tap_fail "the guest command's exit status (3) is vmtest's" "exit $rc" "$(tail -n 20 <<<"$out")"
fi

out=$("$vmtest" -- sh -c 'echo c >/proc/sysrq-trigger; sleep 60' 2>&1); rc=$?
if [[ $rc == 121 && $out == *"the guest kernel panicked"* ]]; then
	tap_ok "a guest panic fails fast with 121 and says so"
else
	tap_fail "a guest panic fails fast with 121 and says so" "exit $rc" "$(tail -n 20 <<<"$out")"
fi

start=$(date +%s)
out=$("$vmtest" --timeout 3 -- sleep 600 2>&1); rc=$?
secs=$(($(date +%s) - start))
if [[ $rc == 124 && $out == *"hard timeout"* && $secs -lt 30 ]]; then
	tap_ok "the hard timeout stops the guest (124 after ${secs}s)"
else
	tap_fail "the hard timeout stops the guest" "exit $rc after ${secs}s" "$(tail -n 5 <<<"$out")"
fi
tap_done
