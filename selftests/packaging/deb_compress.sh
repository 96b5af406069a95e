#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The packaged examples stay buildable: the compress step of debian/rules
# (its override_dh_compress, else plain dh_compress, as dh would run it),
# run on a staged libnproxy-dev tree, leaves the examples' sources as they
# are (their Makefile names collective.c) while it still compresses a
# large document.  Cheap: no package is built (debs.sh builds them all).
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
tap_require_cmd dh_compress make
[[ -f $top/debian/rules ]] || tap_skip_all "no debian/ in $top"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-compress.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT
cp -r "$top/debian" "$work/"
staged=$work/debian/libnproxy-dev
ex=$staged/usr/share/doc/nproxy/examples
mkdir -p "$ex" "$staged/usr/share/doc/libnproxy-dev"
cp "$top"/examples/*.c "$top/examples/Makefile" "$ex/"
# Larger than dh_compress's 4 KiB floor: this one must be compressed.
head -c 10000 "$top/README.md" >"$staged/usr/share/doc/libnproxy-dev/notes.txt"

tap_plan 2
cd "$work" || exit 1
if grep -q "^override_dh_compress:" debian/rules; then
	step=(make -s -f debian/rules override_dh_compress)
else
	step=(dh_compress)
fi
"${step[@]}" >"$work/compress.log" 2>&1
gz=$(cd "$ex" && ls ./*.gz 2>/dev/null)
if [[ -z $gz && -f $ex/collective.c && -f $ex/device_trigger.c && -f $ex/Makefile ]]; then
	tap_ok "${step[*]}: the examples' sources stay uncompressed"
else
	tap_fail "${step[*]}: the examples' sources stay uncompressed" "compressed: $gz" "$(cat "$work/compress.log")"
fi
if [[ -f $staged/usr/share/doc/libnproxy-dev/notes.txt.gz ]]; then
	tap_ok "${step[*]}: a large document is still compressed"
else
	tap_fail "${step[*]}: a large document is still compressed" "$(cd "$staged" && find . -type f)"
fi
tap_done
