#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make install` as a packager runs it: DESTDIR plus non-default BINDIR,
# SBINDIR and LIBDIR all honoured; the system files (udev rule, sysusers.d
# group, modprobe.d, bash completion, man pages) present; pkg-config finds
# the installed library and pulls libfabric in privately; an outside
# program builds against the installed tree, shared and static, and sees the
# library's runtime version; nothing test-only (the loopback seam, failure
# hooks) is installed or exported; `make uninstall` takes every file back; a
# command-line CPPFLAGS adds to the project's flags instead of dropping them.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
tap_require_cmd make pkg-config cc
[[ -z ${SAN:-} ]] || tap_skip_all "the install tree is the release build's (SAN=$SAN)"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-install.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT
root=$work/root
version=$(cat "$top/VERSION")
multiarch=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
dirs=(PREFIX=/usr BINDIR=/opt/np/bin SBINDIR=/opt/np/sbin LIBDIR=/usr/lib/$multiarch
	UDEVRULESDIR=/usr/lib/udev/rules.d)

tap_plan 10

if make -s --no-print-directory -C "$top" install DESTDIR="$root" "${dirs[@]}" >"$work/install.log" 2>&1; then
	tap_ok "make install DESTDIR=... BINDIR SBINDIR LIBDIR"
else
	tap_fail "make install DESTDIR=... BINDIR SBINDIR LIBDIR" "$(tail -n 20 "$work/install.log")"
	tap_done
fi

want=(opt/np/bin/nproxy-run opt/np/sbin/nproxyctl
	"usr/lib/$multiarch/libnproxy.so.0" "usr/lib/$multiarch/libnproxy.so" "usr/lib/$multiarch/libnproxy.a"
	"usr/lib/$multiarch/pkgconfig/libnproxy.pc" usr/include/nproxy/version.h usr/include/linux/nproxy.h
	usr/lib/udev/rules.d/60-nproxy.rules usr/lib/sysusers.d/nproxy.conf usr/lib/modprobe.d/nproxy.conf
	usr/share/man/man1/nproxy-run.1 usr/share/man/man3/libnproxy.3 usr/share/man/man3/nproxy_version.3
	usr/share/man/man4/nproxy.4 usr/share/man/man8/nproxyctl.8
	usr/share/bash-completion/completions/nproxy-run usr/share/bash-completion/completions/nproxyctl)
absent=()
for f in "${want[@]}"; do [[ -e $root/$f ]] || absent+=("$f"); done
stray=$(cd "$root" && find . \( -path ./usr/bin -o -path ./usr/sbin -o -path ./usr/local \) -print)
grep -q '^g nproxy ' "$root/usr/lib/sysusers.d/nproxy.conf" || absent+=("the sysusers.d group line")
[[ ! -e $root/usr/lib/modules-load.d/nproxy.conf ]] || absent+=("(modules-load.d installed without INSTALL_MODULES_LOAD=1)")
if ((${#absent[@]} == 0)) && [[ -z $stray ]]; then
	tap_ok "every file in its directory, none in the default ones"
else
	tap_fail "every file in its directory, none in the default ones" "missing: ${absent[*]}" "stray: $stray"
fi

# The selftests' loopback seam and helpers live in testlib/, never in the library.
test_only=$(cd "$root" && find . -path '*/include/nproxy/*' -name '*loopback*' -print)
test_only+=$(nm -D --defined-only "$root/usr/lib/$multiarch/libnproxy.so.0" 2>&1 |
	grep -E ' (nproxy_loopback_|[a-z_]*_test_)' || true)
if [[ -z $test_only ]] && nm -D --defined-only "$root/usr/lib/$multiarch/libnproxy.so.0" | grep -q ' nproxy_version'; then
	tap_ok "no test-only header installed, no test-only symbol exported"
else
	tap_fail "no test-only header installed, no test-only symbol exported" "$test_only"
fi

pc=(env PKG_CONFIG_SYSROOT_DIR="$root"
	PKG_CONFIG_LIBDIR="$root/usr/lib/$multiarch/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig:/usr/lib/pkgconfig"
	pkg-config)
got_ver=$("${pc[@]}" --modversion libnproxy 2>&1)
static_libs=$("${pc[@]}" --static --libs libnproxy 2>&1)
if [[ $got_ver == "$version" && $static_libs == *-lnproxy* && $static_libs == *-lfabric* ]] &&
	grep -q '^Requires.private: libfabric' "$root/usr/lib/$multiarch/pkgconfig/libnproxy.pc"; then
	tap_ok "pkg-config: version $got_ver, Requires.private libfabric ($static_libs)"
else
	tap_fail "pkg-config: version and Requires.private" "modversion: $got_ver" "static libs: $static_libs"
fi

# The headers' version macros follow the VERSION file.
IFS=. read -r vmaj vmin vpat <<<"$version"
hdr=$root/usr/include/nproxy/version.h
if grep -qE "^#define NPROXY_VERSION_MAJOR[[:space:]]+$vmaj\$" "$hdr" &&
	grep -qE "^#define NPROXY_VERSION_MINOR[[:space:]]+$vmin\$" "$hdr" &&
	grep -qE "^#define NPROXY_VERSION_PATCH[[:space:]]+$vpat\$" "$hdr" &&
	grep -qE "^#define NPROXY_VERSION_STRING[[:space:]]+\"$version\"\$" "$hdr"; then
	tap_ok "nproxy/version.h says $version, as VERSION does"
else
	tap_fail "nproxy/version.h says $version, as VERSION does" "$(grep '#define NPROXY_VERSION_' "$hdr")"
fi

cat >"$work/outside.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <nproxy/version.h>
#include <nproxy/status.h>
#if !NPROXY_VERSION_AT_LEAST(0, 1, 0)
#error "version macros"
#endif
int main(void)
{
	if (strcmp(nproxy_version(), NPROXY_VERSION_STRING) ||
	    nproxy_version_code() != NPROXY_VERSION_CODE)
		return 1;
	printf("%s %d %s\n", nproxy_version(), nproxy_version_code(), nproxy_status_str(NPROXY_RESOURCE));
	return 0;
}
C
cflags=$("${pc[@]}" --cflags libnproxy)
libs=$("${pc[@]}" --libs libnproxy)
want_out="$version $((vmaj * 10000 + vmin * 100 + vpat)) NPROXY_RESOURCE"
out=
if cc $cflags -o "$work/outside-shared" "$work/outside.c" $libs >"$work/cc.log" 2>&1 &&
	out=$(LD_LIBRARY_PATH=$root/usr/lib/$multiarch "$work/outside-shared" 2>&1) && [[ $out == "$want_out" ]] &&
	LD_LIBRARY_PATH=$root/usr/lib/$multiarch ldd "$work/outside-shared" | grep -qF "$root/usr/lib/$multiarch/libnproxy.so.0"; then
	tap_ok "an outside program links the installed libnproxy.so: $out"
else
	tap_fail "an outside program links the installed libnproxy.so" "$(cat "$work/cc.log")" "output: $out"
fi
out=
# libnproxy.a with libfabric shared: Debian ships no static libfabric, and
# `pkg-config --static` lists libfabric's private libs (psm2, rdmacm) too.
if cc $cflags -o "$work/outside-static" "$work/outside.c" -L"$root/usr/lib/$multiarch" -Wl,-Bstatic -lnproxy -Wl,-Bdynamic \
	$(pkg-config --libs libfabric) -pthread >"$work/cc.log" 2>&1 &&
	out=$("$work/outside-static" 2>&1) && [[ $out == "$want_out" ]]; then
	tap_ok "an outside program links the installed libnproxy.a: $out"
else
	tap_fail "an outside program links the installed libnproxy.a" "$(cat "$work/cc.log")" "output: $out"
fi

# A command-line CPPFLAGS is appended to the project's -I/-D, not instead of them.
line=$(make --no-print-directory -n -W "$top/lib/common/version.c" -C "$top/lib" O="$work/o" \
	CPPFLAGS=-DNPROXY_USER_FLAG_PROBE "$work/o/lib/common/version.o" 2>&1 | grep -- '-c -o')
if [[ $line == *"-I$top/include "*"-DNPROXY_USER_FLAG_PROBE"* ]]; then
	tap_ok "make CPPFLAGS=... keeps the project's flags and appends the user's"
else
	tap_fail "make CPPFLAGS=... keeps the project's flags and appends the user's" "$line"
fi

if make -s --no-print-directory -C "$top" install DESTDIR="$work/root2" "${dirs[@]}" INSTALL_MODULES_LOAD=1 \
	>"$work/install2.log" 2>&1 && [[ $(grep -v '^#' "$work/root2/usr/lib/modules-load.d/nproxy.conf") == nproxy ]]; then
	tap_ok "INSTALL_MODULES_LOAD=1 adds modules-load.d/nproxy.conf"
else
	tap_fail "INSTALL_MODULES_LOAD=1 adds modules-load.d/nproxy.conf" "$(tail -n 5 "$work/install2.log")"
fi

if make -s --no-print-directory -C "$top" uninstall DESTDIR="$root" "${dirs[@]}" >"$work/uninstall.log" 2>&1; then
	left=$(cd "$root" && find . \( -type f -o -type l \) -print)
	if [[ -z $left ]]; then tap_ok "make uninstall removes every installed file"
	else tap_fail "make uninstall removes every installed file" "left: $left"; fi
else
	tap_fail "make uninstall removes every installed file" "$(tail -n 20 "$work/uninstall.log")"
fi
tap_done
