#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxyctl top and hang-report on the module's regions (inside the VM,
# nproxy.ko loaded): the host's hang_report.sh with the kmod handshake, so
# the proxy state is read from the NPROXY_OFF_PROXY page and the device
# evidence from the module's program (info.prog_step).
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build
[[ -e /dev/nproxy ]] || tap_skip_all "/dev/nproxy missing: nproxy.ko not loaded (run under scripts/vmtest)"
HANG_BACKEND=kmod NPROXY_BUILD=$BUILD NPROXY_TOP=$TOP exec "$TOP/selftests/tools/hang_report.sh"
