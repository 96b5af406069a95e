#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# mutation-check.sh - show that the VM selftests catch a module with a
# feature removed.  Builds one nproxy.ko per mutation below (each deletes
# one behaviour the module promises), boots the VM once, loads each mutant in
# turn and runs the selftest program that must catch it.  A mutant
# "survives" when that program passes; the script then exits 1.
# These are hand-written behaviour removals, each with the program meant
# to catch it (what scripts/mutation.py --regression is for the library);
# the systematic one-token mutants of every kmod/ file are
# `make mutation-kmod` (scripts/mutation-kmod).
#
#   kmod/mutation-check.sh        (after `make`: needs build/selftests/vm/kmod-*)
#   MUTANTS="no-fault-handler ..." kmod/mutation-check.sh   (only those)
#
# Not part of `make check` (it takes one extra VM boot and a module
# build per entry).  Removing a file's .owner is not listed: the unload test catches
# it, but the guest then oopses on the next close, by design of the bug.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
KDIR=${KDIR:-$(ls -d /lib/modules/6.1.0-*-amd64/build 2>/dev/null | sort -V | tail -n1)}
vm=$top/build/selftests/vm
work=$(mktemp -d /tmp/nproxy-mutants.XXXXXX)
trap 'rm -rf "$work"' EXIT

# name # file # perl substitution (applied with -0pe) # test program
mutants=(
	"sentinel#region.c#s/r->triggers\[i\] = NPROXY_TRIGGER_SENTINEL;/r->triggers[i] = 0;/#kmod-region"
	"wait-never-waits#prog.c#s/if \(nproxy_sem_reached\(sem, value\)\) \{/if (1) {/#kmod-prog"
	"no-poll-wake#prog.c#s/nproxy_region_wake_pollers\(r, EPOLLIN \| EPOLLRDNORM\);//#kmod-prog"
	"timeout-is-success#prog.c#s/return sem \? -ETIMEDOUT : 0;/return 0;/#kmod-prog"
	"map-private-allowed#region.c#s/if \(!\(vma->vm_flags & VM_MAYSHARE\)\)/if (0)/#kmod-mmap"
	"info-writable#region.c#s/if \(vma->vm_flags & VM_WRITE\)\n/if (0)\n/#kmod-mmap"
	"info-maywrite-kept#region.c#s/vma->vm_flags &= ~VM_MAYWRITE;//#kmod-mmap"
	"reserved-ignored#region.c#s/if \(req->flags \|\| req->pad \|\| req->reserved\[0\] \|\| req->reserved\[1\]\)/if (req->flags)/#kmod-region"
	"region-never-freed#region.c#s/(nproxy_nl_event\(r, &ev\);\n\tatomic64_dec\(&nproxy_stats.regions_live\);)/nproxy_nl_event(r, &ev);/#kmod-region"
	"no-events#netlink.c#s/genlmsg_multicast\(&nproxy_genl_family, msg, 0, NPROXY_MCGRP_EVENTS,\n\t\t\t  GFP_KERNEL\);/nlmsg_free(msg);/#kmod-netlink"
	"close-keeps-program#prog.c#s/(void nproxy_prog_region_release\(struct nproxy_region \*r\)\n\{\n)\tWRITE_ONCE\(r->cancel, true\);/\$1\tWRITE_ONCE(r->cancel, false);/#kmod-prog"
	"no-fault-handler#region.c#s/\t\.fault = nproxy_region_fault,\n//#kmod-mmap"
	"dump-takes-region-id#netlink.c#s/if \(info->attrs && info->attrs\[NPROXY_A_REGION_ID\]\)/if (0)/#kmod-netlink"
	"fault-injection-inert#fault.c#s/\tatomic64_inc\(&nproxy_faults_injected\);\n\treturn true;/\treturn false;/#kmod-fault"
	"submit-acts-then-faults#dev.c#s/if \(\(dir & _IOC_READ\) && copy_to_user\(uarg, karg, ksize\)\)\n\t\t\treturn -EFAULT;//#kmod-prog"
	"collect-consumes-on-failed-copy#prog.c#s/\tif \(copied\) \{/\tif (true) {/#kmod-prog"
	"dynamic-minor#nproxy_priv.h#s/NPROXY_MISC_MINOR\t249/NPROXY_MISC_MINOR\tMISC_DYNAMIC_MINOR/#kmod-device"
)
if [[ -n ${MUTANTS:-} ]]; then
	chosen=()
	for m in "${mutants[@]}"; do
		[[ " $MUTANTS " == *" ${m%%#*} "* ]] && chosen+=("$m")
	done
	((${#chosen[@]})) || { echo "mutation-check: no mutant named in MUTANTS" >&2; exit 1; }
	mutants=("${chosen[@]}")
fi

[[ -n $KDIR ]] || { echo "mutation-check: no kernel headers" >&2; exit 1; }
for m in "${mutants[@]}"; do
	IFS='#' read -r name file expr test <<<"$m"
	[[ -x $vm/$test ]] || { echo "mutation-check: $vm/$test missing (run make)" >&2; exit 1; }
	# The checkout's layout, as kmod/Kbuild expects it: ../VERSION and
	# ../include/uapi beside kmod/.
	d=$work/$name
	mkdir -p "$d/kmod" "$d/include/uapi/linux"
	for f in "$top"/kmod/*.c "$top"/kmod/*.h "$top"/kmod/Kbuild; do
		[[ $f == *.mod.c ]] || cp "$f" "$d/kmod/"
	done
	cp "$top/include/uapi/linux/nproxy.h" "$d/include/uapi/linux/"
	cp "$top/VERSION" "$d/"
	perl -0pi -e "$expr" "$d/kmod/$file"
	if cmp -s "$d/kmod/$file" "$top/kmod/$file"; then
		echo "mutation-check: $name: the mutation no longer applies to kmod/$file" >&2
		exit 1
	fi
	make -s -C "$KDIR" M="$d/kmod" modules >"$d/build.log" 2>&1 ||
		{ echo "mutation-check: $name does not build:"; cat "$d/build.log"; exit 1; } >&2
	echo "built mutant $name"
done

guest=$work/guest.sh
{
	echo '#!/bin/sh'
	for m in "${mutants[@]}"; do
		IFS='#' read -r name file expr test <<<"$m"
		cat <<EOF
if insmod $work/$name/kmod/nproxy.ko; then
	if NPROXY_KMOD=$work/$name/kmod/nproxy.ko $vm/$test >$work/$name/test.log 2>&1; then
		echo "MUTANT $name: SURVIVED ($test passed)"
	else
		echo "MUTANT $name: caught by $test: \$(grep '^not ok' $work/$name/test.log | sed 's/^not ok [0-9]* //' | tr '\n' ' ')"
	fi
	rmmod nproxy || echo "MUTANT $name: rmmod failed"
else
	echo "MUTANT $name: SURVIVED (insmod failed)"
fi
EOF
	done
} >"$guest"
chmod +x "$guest"

cd "$top"
out=$work/vm.log
scripts/vmtest --timeout 900 -- "$guest" | tee "$out" | grep '^MUTANT' || true
caught=$(grep -c '^MUTANT .*: caught' "$out" || true)
echo "mutation-check: $caught of ${#mutants[@]} mutants caught"
[[ $caught -eq ${#mutants[@]} ]]
