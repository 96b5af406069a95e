#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `man FUNCTION` works for every function the library exports: after `make
# install DESTDIR=...`, each function symbol of libnproxy.so (nm -D) resolves
# under the installed man tree to a page, directly or through a one-line
# ".so" alias, whose SYNOPSIS names the function and which has a RETURN
# VALUE section; `make uninstall` takes the aliases back.  Every page of a
# section carries the same source and manual in its .TH line.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
build=${NPROXY_BUILD:-$top/build}
tap_require_cmd make nm man
[[ -z ${SAN:-} ]] || tap_skip_all "the install tree is the release build's (SAN=$SAN)"
lib=$build/lib/libnproxy.so
[[ -e $lib ]] || tap_skip_all "no $lib: build the library first (make)"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-man.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT
# man may read the tree as another user: let it.
chmod 0755 "$work"
root=$work/root
mandir=$root/usr/share/man

mapfile -t funcs < <(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort -u)
((${#funcs[@]} > 10)) || tap_skip_all "nm -D found only ${#funcs[@]} functions in $lib: the scan is broken"

tap_plan 7

# .TH TITLE SECTION DATE SOURCE MANUAL: one SOURCE and MANUAL per section.
mixed=
for sec in 1 3 4 8; do
	titles=$(for f in "$top"/Documentation/man/*."$sec"; do
		[[ -e $f ]] || continue
		sed -n 's/^\.TH [^ ]* [^ ]* [^ ]* \(.*\)$/\1/p' "$f" | head -n 1
	done | sort -u)
	(($(grep -c . <<<"$titles") <= 1)) || mixed+=" section $sec: $(tr '\n' '|' <<<"$titles")"
done
if [[ -z $mixed ]]; then
	tap_ok "each section's pages share the .TH source and manual"
else
	tap_fail "each section's pages share the .TH source and manual" "$mixed" \
		"$(grep -H '^\.TH' "$top"/Documentation/man/*)"
fi

if make -s --no-print-directory -C "$top" install DESTDIR="$root" PREFIX=/usr >"$work/install.log" 2>&1; then
	tap_ok "make install DESTDIR=... PREFIX=/usr"
else
	tap_fail "make install DESTDIR=... PREFIX=/usr" "$(tail -n 20 "$work/install.log")"
	tap_done
fi

# A name without a page must not resolve (man -M looks nowhere else).
if man -M "$mandir" -w nproxy_no_such_function >/dev/null 2>&1; then
	tap_fail "man -M finds only the installed tree" "nproxy_no_such_function resolved"
else
	tap_ok "man -M finds only the installed tree"
fi

# page_of FUNCTION: the installed file documenting it, .so followed once.
page_of() {
	local path first
	path=$(man -M "$mandir" -w "$1" 2>/dev/null | head -n 1) || return 1
	[[ -n $path && $path == "$mandir"/* ]] || return 1
	first=$(grep -v '^\.\\"' "$path" | head -n 1)
	if [[ $first =~ ^\.so[[:space:]]+([^[:space:]]+) ]]; then
		path=$mandir/${BASH_REMATCH[1]}
		[[ -f $path ]] || return 1
	fi
	printf '%s\n' "$path"
}

# section FILE NAME: the lines of section .SH NAME (up to the next .SH).
section() {
	sed -n "/^\\.SH \"\\{0,1\\}$2\"\\{0,1\\}\$/,/^\\.SH /{/^\\.SH /d;p}" "$1"
}

unresolved=() unnamed=() no_return=()
declare -A pages=()
for f in "${funcs[@]}"; do
	if ! page=$(page_of "$f"); then
		unresolved+=("$f")
		continue
	fi
	pages[${page##*/}]=1
	section "$page" SYNOPSIS | sed 's/\\f[BIRP]//g; s/\\//g' | grep -qw -- "$f" || unnamed+=("$f (${page##*/})")
	[[ -n $(section "$page" "RETURN VALUE") ]] || no_return+=("$f (${page##*/})")
done
n=${#funcs[@]}
if ((${#unresolved[@]} == 0)); then
	tap_ok "man -w resolves all $n exported functions (pages: ${!pages[*]})"
else
	tap_fail "man -w resolves every exported function" "no page for ${#unresolved[@]} of $n: ${unresolved[*]}"
fi
if ((${#unnamed[@]} == 0)); then
	tap_ok "each one's page names it in its SYNOPSIS"
else
	tap_fail "each one's page names it in its SYNOPSIS" "not in SYNOPSIS: ${unnamed[*]}"
fi
if ((${#unresolved[@]} == 0 && ${#no_return[@]} == 0)); then
	tap_ok "each one's page has a RETURN VALUE section"
else
	tap_fail "each one's page has a RETURN VALUE section" "none for: ${no_return[*]}" \
		"unresolved: ${unresolved[*]}"
fi

make -s --no-print-directory -C "$top" uninstall DESTDIR="$root" PREFIX=/usr >"$work/uninstall.log" 2>&1
left=$(cd "$root" && find . -path "./usr/share/man/*" -type f | sort)
if [[ -z $left ]]; then
	tap_ok "make uninstall removes every page and alias"
else
	tap_fail "make uninstall removes every page and alias" "left: $left" "$(tail -n 5 "$work/uninstall.log")"
fi
tap_done
