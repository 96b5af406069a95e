#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# examples/ as a new user meets them: `make install` puts their sources
# under share/doc/nproxy/examples; they build there with nothing but
# pkg-config pointed at the installed tree (no path into this checkout),
# link the installed libnproxy.so, and run: device_trigger alone, and
# collective as two ranks of one job (libfabric shm, memfd handshake),
# each saying its data arrived.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
tap_require_cmd make pkg-config cc timeout
[[ -z ${SAN:-} ]] || tap_skip_all "the examples build against the release install (SAN=$SAN)"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-examples.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT
root=$work/root
libdir=$root/usr/lib
exdir=$root/usr/share/doc/nproxy/examples
multiarch=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
RUN_TIMEOUT=120	# seconds: a hung rank is a failure, not a hung check

tap_plan 5

if make -s --no-print-directory -C "$top" install DESTDIR="$root" PREFIX=/usr >"$work/install.log" 2>&1 &&
	[[ -f $exdir/collective.c && -f $exdir/device_trigger.c && -f $exdir/Makefile ]]; then
	tap_ok "make install puts the examples' sources in share/doc/nproxy/examples"
else
	tap_fail "make install puts the examples' sources in share/doc/nproxy/examples" \
		"$(tail -n 20 "$work/install.log")" "$(ls -R "$root/usr/share/doc" 2>&1)"
	tap_done
fi

# The installed .pc, with libfabric's own from the system.
export PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig:/usr/lib/pkgconfig
mkdir -p "$work/bin"
if make --no-print-directory -C "$exdir" O="$work/bin" >"$work/build.log" 2>&1 &&
	[[ -x $work/bin/collective && -x $work/bin/device_trigger ]] &&
	! grep -qF -- "$top" "$work/build.log"; then
	tap_ok "the examples build from the installed tree with pkg-config alone"
else
	tap_fail "the examples build from the installed tree with pkg-config alone" "$(cat "$work/build.log")"
	tap_done
fi

if LD_LIBRARY_PATH=$libdir ldd "$work/bin/collective" | grep -qF "$libdir/libnproxy.so.0"; then
	tap_ok "collective links the installed libnproxy.so.0"
else
	tap_fail "collective links the installed libnproxy.so.0" "$(LD_LIBRARY_PATH=$libdir ldd "$work/bin/collective")"
fi

out=$(LD_LIBRARY_PATH=$libdir NPROXY_HANDSHAKE=memfd timeout "$RUN_TIMEOUT" "$work/bin/device_trigger" 2>&1)
rc=$?
if ((rc == 0)) && grep -q '^host: trigger word 0 = 1$' <<<"$out" &&
	grep -q '^device: program done, 3 steps$' <<<"$out" && [[ $(tail -n 1 <<<"$out") == "device_trigger: ok" ]]; then
	tap_ok "device_trigger: the host saw the trigger and the device finished"
else
	tap_fail "device_trigger: the host saw the trigger and the device finished" "exit $rc" "$out"
fi

# Two ranks of one job, each its own process, as a launcher would start them.
job=examples-$$-$RANDOM
declare -a pids rcs
for r in 0 1; do
	LD_LIBRARY_PATH=$libdir FI_PROVIDER=shm NPROXY_HANDSHAKE=memfd \
		timeout "$RUN_TIMEOUT" "$work/bin/collective" "$r" 2 "$job" >"$work/rank$r.out" 2>&1 &
	pids[r]=$!
done
for r in 0 1; do
	wait "${pids[r]}"
	rcs[r]=$?
done
ok=1
for r in 0 1; do
	((rcs[r] == 0)) || ok=0
	grep -qx "rank $r: allgather of 2 x 4096 bytes and allreduce of 1024 floats (provider shm, memfd handshake): ok" "$work/rank$r.out" || ok=0
done
if ((ok)); then
	tap_ok "collective: 2 ranks, every chunk arrived and every sum is right on each"
else
	tap_fail "collective: 2 ranks, every chunk arrived and every sum is right on each" "exit codes ${rcs[*]}" \
		"rank 0: $(cat "$work/rank0.out")" "rank 1: $(cat "$work/rank1.out")"
fi
tap_done
