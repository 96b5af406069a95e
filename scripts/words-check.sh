#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# words-check.sh [DIR] - the tree speaks in its own words (part of `make lint`).
#
# Fails, naming file and line, on words that only mean something outside
# the project: a nickname for the reference description instead of the
# reference runtime's name (libnrt / libnccom), issue references (the word
# issue or a hash sign before a number), the description's section signs
# and its labels for the seam calls, and paths of a particular machine
# (under /work or /home); and story prose, where a page should say what
# holds (a find, a past failure, the code before a change, an ABI change
# marked without its version: ABI history goes in
# Documentation/abi-changes.md, per version).  The patterns are spelled
# with bracket expressions so that this file does not match itself.
#
# DIR defaults to the tree this script is in.  In a git work tree only
# tracked files are read (once each, even mid-merge; build outputs are
# not); elsewhere every file outside .git and build*/.  License texts
# (LICENSES/, COPYING) are quoted verbatim and are not ours to reword.
# Exit status: 0 clean, 1 found, 2 usage.

set -u
top=${1:-$(cd "$(dirname "$0")/.." && pwd -P)}
[[ -d $top ]] || { echo "words-check: no directory '$top'" >&2; exit 2; }
cd "$top" || exit 2

# name<TAB>extended regex (grep -E, case-insensitive)
rules=(
	$'reference nickname\t(^|[^[:alnum:]_])the [s]eed([^[:alnum:]_]|$)'
	$'reference section\t§ ?[0-9]'
	$'issue number\t(^|[^[:alnum:]_])[i]ssues? ?#?[0-9]'
	$'issue reference\t(^|[[:space:](\\[])[#][0-9]{1,5}([^[:alnum:]_]|$)'
	$'outside label\t(^|[^[:alnum:]_/.-])[B][0-9]([^[:alnum:]_.]|$)'
	$'machine path\t(^|[^[:alnum:]_.])/([w]ork|[h]ome)/'
	$'story: a find\t(^|[^[:alnum:]_])(([w]e|I) found|found (a|an|the|two|three|several|[0-9]+) (new )?([b]ugs?|[r]egressions?))([^[:alnum:]_]|$)'
	$'story: the past\t(^|[^[:alnum:]_])([o]nce (failed|crashed|hung|broke)|[i]t turned out|used to (fail|die|crash|hang|leak|retry|accept|fire|cause|break))([^[:alnum:]_]|$)'
	$'story: old code\t(^|[^[:alnum:]_])the ([o]ld|[p]revious) (code|version|implementation|module|library)([^[:alnum:]_]|$)'
	$'ABI change without a version\t(^|[^[:alnum:]_])([l]ater )?ABI change\*?:'
)

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	mapfile -d '' files < <(git ls-files -z -- . ':!:LICENSES' ':!:COPYING' | sort -zu)
else
	mapfile -d '' files < <(find . \( -name .git -o -name 'build*' -o -name LICENSES \) -prune \
		-o -type f ! -name COPYING -print0)
fi
((${#files[@]})) || { echo "words-check: no files under $top" >&2; exit 2; }

found=0
for rule in "${rules[@]}"; do
	name=${rule%%$'\t'*}
	re=${rule#*$'\t'}
	# The outside-label rule is case-sensitive: b1.txt is a file name.
	ci=-i
	[[ $name == "outside label" ]] && ci=
	hits=$(printf '%s\0' "${files[@]}" | xargs -0 grep -HnIE $ci -- "$re" 2>/dev/null)
	if [[ -n $hits ]]; then
		found=1
		while IFS= read -r line; do
			printf 'words-check: %s: %s\n' "$name" "$line"
		done <<<"$hits"
	fi
done

if ((found)); then
	echo "words-check: say it in the project's own words (Documentation/development.md, \"Words\")" >&2
	exit 1
fi
echo "words-check: clean (${#files[@]} files)"
