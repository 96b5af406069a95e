#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Run build/bench/kmod_latency inside the VM with kmod/nproxy.ko loaded.
#   bench/kmod_latency.sh [ROUNDS [POLL_NS...]]   (from anywhere)
# Needs `make` (module + bench binaries) first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# bench/kmod_latency.sh or its copy in build/bench/
if [[ -d $here/../kmod ]]; then top=$(cd "$here/.." && pwd -P); else top=$(cd "$here/../.." && pwd -P); fi
ko=$top/kmod/nproxy.ko
bin=$top/build/bench/kmod_latency
[[ -f $ko ]] || { echo "kmod_latency: $ko missing (make module)" >&2; exit 1; }
[[ -x $bin ]] || { echo "kmod_latency: $bin missing (make bench-build)" >&2; exit 1; }
cd "$top"
if (($#)); then set -- "$@"; else set -- 20000; fi
exec scripts/vmtest --timeout 900 --module "$ko" -- "$bin" "$@"
