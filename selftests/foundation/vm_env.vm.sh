#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Inside scripts/vmtest: the guest is what VM tests rely on - the Debian 6.1
# kernel, root, lo up, writable /tmp /run /dev/shm, the host tree read-only,
# and kmod/nproxy.ko loaded by `make check`.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}

[[ $(hostname) == vmtest ]] || tap_skip_all "not inside scripts/vmtest (run: scripts/run-tests --vm DIR)"

tap_plan 7
tap_check "guest runs a 6.1 kernel" grep -q '^Linux version 6\.1\.' /proc/version
tap_check "running as root" test "$(id -u)" = 0
tap_check "lo is up" sh -c 'ip -o link show lo | grep -q "UP"'
tap_check "/tmp, /run and /dev/shm are writable" \
	sh -c 'for d in /tmp /run /dev/shm; do f=$(mktemp -p $d) && rm -f "$f" || exit 1; done'
tap_check "the host's /usr is read-only" sh -c '! touch /usr/.vmtest-ro-probe 2>/dev/null'
tap_check "fresh /proc (pid 1 is the guest's init)" sh -c 'tr "\0" " " </proc/1/cmdline | grep -q "/init"'
if grep -q '^nproxy ' /proc/modules; then
	tap_check "nproxy.ko is loaded and live" sh -c 'grep -q "^nproxy .* Live " /proc/modules'
else
	tap_skip "nproxy.ko is loaded and live" "nproxy.ko not loaded (vmtest ran without --module kmod/nproxy.ko)"
fi
tap_done
