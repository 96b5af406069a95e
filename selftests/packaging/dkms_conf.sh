#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The one dkms.conf works both ways the README gives: `dkms add .` in a
# checkout, and `make -C kmod dkms-src` then `dkms add nproxy/<version>`.
# Each dkms run uses its own dkms/source/install trees under a temp dir and
# only builds (never installs into /lib/modules).  dkms itself creates its
# module-signing key in /var/lib/dkms on first use, as on any dkms host.
# The dkms-src tree holds only what the module build needs, and the dkms
# commands the README and dkms.conf give work from /usr/src, not from a
# path (dkms would copy the whole checkout, build trees included).
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
version=$(cat "$top/VERSION")

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-dkms.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT

tap_plan 7

conf_version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
if [[ $conf_version == "$version" ]] && ! grep -q '@[A-Z_]*@' "$top/dkms.conf"; then
	tap_ok "dkms.conf: PACKAGE_VERSION $conf_version as VERSION, nothing left to substitute"
else
	tap_fail "dkms.conf: PACKAGE_VERSION as VERSION, nothing left to substitute" \
		"dkms.conf says '$conf_version', VERSION '$version'" "$(grep -n '@' "$top/dkms.conf")"
fi

src=$work/root/usr/src/nproxy-$version
if make -s --no-print-directory -C "$top/kmod" dkms-src DESTDIR="$work/root" >"$work/src.log" 2>&1 &&
	[[ -f $src/dkms.conf && -f $src/VERSION && -f $src/kmod/Kbuild && -f $src/kmod/main.c &&
		-f $src/include/uapi/linux/nproxy.h ]] && cmp -s "$src/dkms.conf" "$top/dkms.conf"; then
	tap_ok "make -C kmod dkms-src lays out /usr/src/nproxy-$version as the checkout"
else
	tap_fail "make -C kmod dkms-src lays out /usr/src/nproxy-$version as the checkout" \
		"$(cat "$work/src.log")" "$(cd "$work/root" 2>/dev/null && find . | head -n 30)"
fi

# Only the module build's files: no build tree, objects or editor leftovers.
extra=$(cd "$src" 2>/dev/null && find . -type f ! -name dkms.conf ! -name VERSION \
	! -path ./include/uapi/linux/nproxy.h ! -regex '\./kmod/\(Kbuild\|Makefile\|[a-z_]*\.[ch]\)' | sort)
if [[ -d $src && -z $extra ]] && ! find "$src" -name '*.mod.c' | grep -q .; then
	tap_ok "the dkms source tree holds only dkms.conf, VERSION, kmod/ sources and the uapi header"
else
	tap_fail "the dkms source tree holds only what the module build needs" "extra: $extra"
fi

# "dkms add/install <path>" (., kmod/, /...) copies that tree into /usr/src.
bad=$(grep -nE 'dkms +(add|install)[^|&;#]* (\.|\./|kmod/?|/[^ ]*)( |$)' "$top/README.md" "$top/dkms.conf" |
	grep -v 'would copy\|works too')
if [[ -z $bad ]] && grep -q 'make -C kmod dkms-src' "$top/README.md" &&
   grep -q 'dkms install nproxy/' "$top/README.md" && grep -q 'rm -r /usr/src/nproxy-' "$top/README.md"; then
	tap_ok "README and dkms.conf: dkms-src, then dkms add/install nproxy/<version>; removal takes /usr/src's copy too"
else
	tap_fail "README and dkms.conf give dkms commands that work from /usr/src" "install from a path:" "$bad"
fi

kver=
for d in /lib/modules/6.1.0-*-amd64/build; do [[ -e $d/Makefile ]] && kver=$(basename "$(dirname "$d")"); done

# dkms_build NAME SOURCETREE WHAT: dkms add WHAT (a path, or nproxy/<version>
# found in SOURCETREE) and build, in private trees; check the module's metadata.
dkms_build() {
	local name=$1 t=$work/$1 ko info
	mkdir -p "$t/dkms" "$t/inst"
	local trees=(--dkmstree "$t/dkms" --installtree "$t/inst" --sourcetree "$2")
	if ! { dkms add "${trees[@]}" "$3" && nice -n 10 dkms build "${trees[@]}" -k "$kver" nproxy/"$version"; } \
		>"$t.log" 2>&1; then
		tap_fail "$name: dkms add + build" "$(tail -n 25 "$t.log")" "$(tail -n 25 "$t"/dkms/nproxy/*/build/make.log 2>/dev/null)"
		return
	fi
	ko=$(find "$t/dkms" -path "*/$kver/*" -name 'nproxy.ko*' | head -n1)
	info=$(modinfo "$ko" 2>&1)
	if [[ -n $ko ]] && grep -qx "version: *$version" <<<"$info" &&
		grep -qx "alias: *devname:nproxy" <<<"$info" && grep -qx "alias: *char-major-10-249" <<<"$info"; then
		tap_ok "$name: dkms build gives nproxy.ko $version with the devname and misc aliases"
	else
		tap_fail "$name: dkms build gives nproxy.ko with version and aliases" "ko: ${ko:-none}" "$info"
	fi
}

if ! command -v dkms >/dev/null; then
	tap_skip "dkms add . and build" "needs dkms (scripts/packages.txt)"
	tap_skip "dkms-src add and build" "needs dkms (scripts/packages.txt)"
elif [[ -z $kver ]]; then
	tap_skip "dkms add . and build" "no kernel headers at /lib/modules/6.1.0-*-amd64/build"
	tap_skip "dkms-src add and build" "no kernel headers at /lib/modules/6.1.0-*-amd64/build"
elif [[ $(id -u) != 0 ]]; then
	tap_skip "dkms add . and build" "dkms needs root"
	tap_skip "dkms-src add and build" "dkms needs root"
else
	# `dkms add .` in this checkout (dkms copies it into the private source tree).
	dkms_build "checkout" "$work/checkout-src" "$top"
	dkms_build "dkms-src" "$work/root/usr/src" "nproxy/$version"
fi

# The installed module's aliases name the node the udev rule hands out.
if grep -q 'KERNEL=="nproxy"' "$top/kmod/60-nproxy.rules" && grep -q 'MODULE_ALIAS("devname:" NPROXY_DEVICE_NAME)' "$top/kmod/main.c"; then
	tap_ok "the udev rule and the devname alias name the same node"
else
	tap_fail "the udev rule and the devname alias name the same node"
fi
tap_done
