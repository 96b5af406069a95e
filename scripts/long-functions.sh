#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# long-functions.sh [-n LINES] DIR|FILE...: print every C function whose body
# is longer than LINES lines (default 80), longest first, as
#   LINES  FUNCTION  FILE:LINE
# The body is counted between the lines of its opening and closing braces
# (kernel layout: both alone at the start of a line), blank lines and
# comments included, as a reader sees it.  Functions are found with
# universal-ctags when it is installed (scripts/packages.txt), else by the
# brace layout alone.  Exit status 0 whether or not any was found: it is a
# report, not a gate.
set -euo pipefail

max=80
if [[ ${1:-} == -n ]]; then
	max=${2:?"-n needs a number"}
	shift 2
fi
[[ $max =~ ^[0-9]+$ ]] || { echo "long-functions.sh: -n: '$max' is not a number" >&2; exit 2; }
(($#)) || { echo "usage: long-functions.sh [-n LINES] DIR|FILE..." >&2; exit 2; }

mapfile -t files < <(find "$@" -name '*.c' -type f | sort)
((${#files[@]})) || exit 0

# Every function as "FILE START END NAME" (START: the line its name is on).
list_functions() {
	if command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q Universal; then
		ctags --c-kinds=f --fields=+ne -o - "${files[@]}" |
			awk -F'\t' '{
				line = end = ""
				for (i = 4; i <= NF; i++) {
					if ($i ~ /^line:/) line = substr($i, 6)
					if ($i ~ /^end:/) end = substr($i, 5)
				}
				if (line != "" && end != "") print $2, line, end, $1
			}'
		return
	fi
	# Without ctags: a line "{" at column 0 opens a function body, "}" at
	# column 0 closes it; the name is the last identifier before "(" on
	# the lines since the previous top-level statement.
	for f in "${files[@]}"; do
		awk -v file="$f" '
			/^[{]/ && !open { open = 1; print file, start ? start : NR, name; next }
			/^[}]/ && open { open = 0; print "END", NR; start = 0; name = ""; next }
			!open && /^[A-Za-z_].*\(/ {
				s = $0; sub(/\(.*/, "", s); n = split(s, w, /[^A-Za-z0-9_]+/)
				name = w[n] != "" ? w[n] : w[n - 1]; start = NR
			}
			!open && /;[ \t]*$/ && !/\(/ { start = 0 }
		' "$f" | awk '$1 == "END" { print prev, $2, pname; next } { prev = $1 " " $2; pname = $3 }'
	done
}

list_functions | while read -r file start end name; do
	# The body starts after the first "{" at column 0 from the name's line.
	brace=$(awk -v s="$start" 'NR >= s && /^[{]/ { print NR; exit }' "$file")
	[[ -n $brace ]] || continue
	body=$((end - brace - 1))
	((body > max)) && printf '%5d  %s  %s:%s\n' "$body" "$name" "$file" "$start"
done | sort -rn
exit 0
