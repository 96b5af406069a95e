#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# man-aliases.sh PAGE.3... - the alias pages `make install` writes, one per
# name in each page's NAME section, so that `man FUNCTION` finds the area
# page that documents it (its SYNOPSIS has the prototype).
#
# Prints one "ALIAS=PAGE" word per alias (nproxy_bp_open=bananaphone.3): ALIAS.3
# is installed as the one line ".so man3/PAGE".  A page's own name is not
# an alias.  Fails when two pages claim one name or a name is a page of
# its own, so an alias never hides a real page.

set -u
declare -A owner=()
declare -A pages=()
for page in "$@"; do pages[${page##*/}]=1; done

rc=0
for page in "$@"; do
	base=${page##*/}
	[[ $base == *.3 ]] || { echo "man-aliases: $page is not a section 3 page" >&2; rc=1; continue; }
	# NAME: the lines up to the next .SH; the names are before the "\-".
	names=$(sed -n '/^\.SH NAME/,/^\.SH /{/^\.SH/d;p}' "$page" | tr '\n' ' ' | sed 's/\\-.*//')
	[[ -n ${names// /} ]] || { echo "man-aliases: $page has no NAME section" >&2; rc=1; continue; }
	for name in ${names//,/ }; do
		name=${name//\\/}
		[[ $name == "${base%.3}" ]] && continue
		if [[ -n ${pages[$name.3]:-} ]]; then
			echo "man-aliases: $name is a page of its own and in NAME of $base" >&2; rc=1
		elif [[ -n ${owner[$name]:-} && ${owner[$name]} != "$base" ]]; then
			echo "man-aliases: $name is in NAME of both ${owner[$name]} and $base" >&2; rc=1
		fi
		owner[$name]=$base
	done
done
((rc == 0)) || exit 1
for name in "${!owner[@]}"; do echo "$name=${owner[$name]}"; done | sort
