#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages, built from a copy of this tree the way the README says
# (dpkg-buildpackage -us -uc -b): the four packages come out, lintian finds
# no error, and, unpacked into an empty root, the installed nproxy-run runs
# a 2-rank job, pkg-config finds the installed library and an outside
# program builds and runs against it, and the packaged examples build with
# their own Makefile where libnproxy-dev puts them and run.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
tap_require_cmd dpkg-buildpackage dpkg-deb dh dh_dkms pkg-config cc timeout
[[ -z ${SAN:-} ]] || tap_skip_all "the packages are the release build's (SAN=$SAN)"
[[ -f $top/debian/control ]] || tap_skip_all "no debian/ in $top"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-debs.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT
version=$(cat "$top/VERSION")
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
arch=$(dpkg --print-architecture)

tap_plan 7

# The sources only (what a clone has), never the build trees.
mkdir -p "$work/nproxy"
if [[ -e $top/.git ]] && command -v git >/dev/null; then
	(cd "$top" && git ls-files --cached --others --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$work/nproxy"
else
	(cd "$top" && tar --exclude=./build --exclude='./build-*' -cf - .) | tar -xf - -C "$work/nproxy"
fi
start=$SECONDS
if (cd "$work/nproxy" && nice -n 10 dpkg-buildpackage -us -uc -b -j2) >"$work/build.log" 2>&1; then
	debs=()
	for p in "nproxy-dkms_${version}_all" "libnproxy0_${version}_$arch" "libnproxy-dev_${version}_$arch" \
		"nproxy-tools_${version}_$arch"; do
		[[ -f $work/$p.deb ]] && debs+=("$work/$p.deb")
	done
	if ((${#debs[@]} == 4)); then
		tap_ok "dpkg-buildpackage -us -uc -b: nproxy-dkms libnproxy0 libnproxy-dev nproxy-tools ($((SECONDS - start)) s)"
	else
		tap_fail "dpkg-buildpackage: the four packages" "$(cd "$work" && ls ./*.deb)"
	fi
else
	tap_fail "dpkg-buildpackage -us -uc -b" "$(tail -n 40 "$work/build.log")"
	tap_done
fi

if command -v lintian >/dev/null; then
	if out=$(nice -n 10 lintian --fail-on error "$work/nproxy_${version}_$arch.changes" 2>&1); then
		tap_ok "lintian: no errors"
	else
		tap_fail "lintian: no errors" "$out"
	fi
else
	tap_skip "lintian: no errors" "needs lintian (scripts/packages.txt)"
fi

root=$work/root
mkdir -p "$root"
for d in "${debs[@]}"; do dpkg-deb -x "$d" "$root"; done
want=(usr/bin/nproxy-run usr/sbin/nproxyctl "usr/lib/$multiarch/libnproxy.so.0" "usr/lib/$multiarch/libnproxy.so"
	"usr/lib/$multiarch/pkgconfig/libnproxy.pc" usr/include/nproxy/version.h usr/include/linux/nproxy.h
	lib/udev/rules.d/60-nproxy.rules usr/lib/sysusers.d/nproxy.conf usr/lib/modprobe.d/nproxy.conf
	"usr/src/nproxy-$version/dkms.conf" "usr/src/nproxy-$version/kmod/Kbuild"
	"usr/src/nproxy-$version/include/uapi/linux/nproxy.h" usr/share/bash-completion/completions/nproxy-run
	usr/share/man/man1/nproxy-run.1.gz usr/share/man/man8/nproxyctl.8.gz usr/share/man/man3/libnproxy.3.gz)
absent=()
for f in "${want[@]}"; do [[ -e $root/$f ]] || absent+=("$f"); done
dpkg-deb -I "$work/nproxy-dkms_${version}_all.deb" postinst 2>/dev/null | grep -q systemd-sysusers ||
	absent+=("(nproxy-dkms's postinst does not create the group)")
if ((${#absent[@]} == 0)); then tap_ok "unpacked: tools, library, headers, .pc, dkms tree, udev rule, group, completion, man pages"
else tap_fail "unpacked: every file in place" "missing: ${absent[*]}"; fi

# The installed nproxy-run, a small 2-rank job (memfd handshake, shm).
out=$(env -u NPROXY_HANDSHAKE -u FI_PROVIDER -u NPROXY_RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMIX_RANK \
	-u PMI_RANK LD_LIBRARY_PATH="$root/usr/lib/$multiarch" \
	timeout 120 "$root/usr/bin/nproxy-run" -p 2 -s 4K:16K -n 3 -w 1 --handshake memfd 2>&1)
rc=$?
if ((rc == 0)) && grep -Eq '^ +16K +4096 +uint32 +none +3 .* 0 +1$' <<<"$out"; then
	tap_ok "the installed nproxy-run -p 2 runs and verifies"
else
	tap_fail "the installed nproxy-run -p 2 runs and verifies" "exit $rc" "$out"
fi

pc=(env PKG_CONFIG_SYSROOT_DIR="$root"
	PKG_CONFIG_LIBDIR="$root/usr/lib/$multiarch/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig"
	pkg-config)
got=$("${pc[@]}" --modversion libnproxy 2>&1)
cat >"$work/outside.c" <<'C'
#include <stdio.h>
#include <nproxy/version.h>
int main(void) { printf("%s\n", nproxy_version()); return 0; }
C
out=
if [[ $got == "$version" ]] &&
	cc $("${pc[@]}" --cflags libnproxy) -o "$work/outside" "$work/outside.c" $("${pc[@]}" --libs libnproxy) >"$work/cc.log" 2>&1 &&
	out=$(LD_LIBRARY_PATH=$root/usr/lib/$multiarch "$work/outside" 2>&1) && [[ $out == "$version" ]]; then
	tap_ok "pkg-config --modversion libnproxy: $got; an outside program runs on the packaged library"
else
	tap_fail "pkg-config and an outside program on the packaged library" "modversion: $got" "$(cat "$work/cc.log")" "output: $out"
fi

# The examples as libnproxy-dev ships them (dh_compress must leave them
# alone): their Makefile, pkg-config on the unpacked root, then a run of
# device_trigger and of collective as two ranks.
ex=$work/examples
cp -r "$root/usr/share/doc/nproxy/examples" "$ex"
ok=1
if "${pc[@]}" --exists libnproxy &&
   "${pc[@]:0:3}" make --no-print-directory -C "$ex" >"$work/examples.log" 2>&1; then
	LD_LIBRARY_PATH=$root/usr/lib/$multiarch NPROXY_HANDSHAKE=memfd timeout 120 "$ex/device_trigger" \
		>>"$work/examples.log" 2>&1 || ok=0
	job=debs-$$-$RANDOM
	pids=()
	for r in 0 1; do
		LD_LIBRARY_PATH=$root/usr/lib/$multiarch FI_PROVIDER=shm NPROXY_HANDSHAKE=memfd \
			timeout 120 "$ex/collective" "$r" 2 "$job" >"$work/collective.$r" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || ok=0; done
	grep -q ': ok$' "$work/collective.0" && grep -q ': ok$' "$work/collective.1" || ok=0
else
	ok=0
fi
if ((ok)); then
	tap_ok "the packaged examples build with their Makefile and run (device_trigger, collective x 2)"
else
	tap_fail "the packaged examples build and run" "$(ls -l "$ex")" "$(cat "$work/examples.log")" \
		"$(cat "$work/collective.0" "$work/collective.1" 2>/dev/null)"
fi

out=$("$root/usr/sbin/nproxyctl" --version 2>&1)
if [[ $out == *"nproxyctl $version"* ]]; then tap_ok "the installed nproxyctl --version: ${out%%$'\n'*}"
else tap_fail "the installed nproxyctl --version" "$out"; fi
tap_done
