#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The loaded module (inside the VM) reports the tree's version and sits on
# the fixed misc minor its char-major-10-249 / devname: aliases promise.
here=$(cd "$(dirname "$0")" && pwd -P)
BUILD=${NPROXY_BUILD:-$(cd "$here/../.." && pwd -P)}
TOP=${NPROXY_TOP:-$(cd "$BUILD/.." && pwd -P)}
. "$TOP/scripts/tap.sh"
[[ -d /sys/module/nproxy ]] || tap_skip_all "nproxy.ko not loaded (run under scripts/vmtest)"

tap_plan 2
want=$(cat "$TOP/VERSION")
got=$(cat /sys/module/nproxy/version 2>&1)
if [[ $got == "$want" ]]; then tap_ok "/sys/module/nproxy/version is $want"
else tap_fail "/sys/module/nproxy/version is $want" "got: $got"; fi
dev=$(cat /sys/class/misc/nproxy/dev 2>&1)
if [[ $dev == 10:249 ]]; then tap_ok "/dev/nproxy is misc 10:249"
else tap_fail "/dev/nproxy is misc 10:249" "got: $dev (another driver on minor 249? see dmesg)"; fi
tap_done
