#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# long-functions.sh - list the C functions longer than a limit.
#
#   scripts/long-functions.sh [-n LINES] [-a ALLOWLIST] DIR|FILE...
#
# Reads kernel brace style: a function's signature starts in column 0,
# its body opens with "{" alone on a line and closes with "}" alone on a
# line; the length is the body's lines between the two.  Prints
# "LINES FILE:LINE FUNCTION" for every function over the limit (default
# 80), marking those the allowlist excuses.  A kselftest harness body is
# named by its macro and arguments, e.g. TEST_F(fixture,name).  Exits 1 when one is over the
# limit and not in the allowlist.
#
# Allowlist (default scripts/long-functions.allow): one function a line,
# "FILE FUNCTION REASON...", the reason required; "#" starts a comment.
# An entry that no longer matches a long function is reported (stale) so
# that the list only shrinks.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
limit=80
allow=$top/scripts/long-functions.allow
while getopts "n:a:" opt; do
	case $opt in
	n) limit=$OPTARG ;;
	a) allow=$OPTARG ;;
	*) echo "usage: $0 [-n LINES] [-a ALLOWLIST] DIR|FILE..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
(($#)) || { echo "usage: $0 [-n LINES] [-a ALLOWLIST] DIR|FILE..." >&2; exit 2; }
[[ $limit =~ ^[0-9]+$ ]] || { echo "long-functions: -n '$limit' is not a number" >&2; exit 2; }

declare -A allowed=()
if [[ -f $allow ]]; then
	while read -r file func reason; do
		[[ -z $file || $file == \#* ]] && continue
		if [[ -z $reason ]]; then
			echo "long-functions: $allow: '$file $func' has no reason" >&2
			exit 2
		fi
		allowed["$file $func"]=1
	done <"$allow"
fi

mapfile -t files < <(find "$@" -name '*.c' -type f | sort)
((${#files[@]})) || { echo "long-functions: no .c files under $*" >&2; exit 2; }

# "LINES FILE:LINE FUNCTION" for every function over the limit.
long=$(cd "$top" 2>/dev/null; for f in "${files[@]}"; do
	rel=$(realpath --relative-to="$top" "$f")
	awk -v file="$rel" -v limit="$limit" '
		infn {			# inside a body: only its closing brace matters
			if ($0 ~ /^\}/) {
				body = NR - start - 1
				if (body > limit)
					printf "%d %s:%d %s\n", body, file, sigline, name
				infn = 0
			}
			next
		}
		# A signature starts in column 0 (not a comment, directive or declaration).
		/^[A-Za-z_]/ && !/;[ \t]*$/ {
			if (!insig) { sig = ""; sigline = NR }
			insig = 1; sig = sig " " $0; next
		}
		/^\{$/ && insig {
			name = sig
			if (name ~ /^[ \t]*(TEST|TEST_F|TEST_HARNESS_MAIN|FIXTURE_SETUP|FIXTURE_TEARDOWN)\(/) {
				# A kselftest harness body: named by the macro and its
				# arguments, TEST_F(fixture,name), as the allowlist says it.
				sub(/^[ \t]*/, "", name)
				sub(/\).*/, ")", name)
				gsub(/[ \t]/, "", name)
			} else {
				sub(/\(.*/, "", name)
				n = split(name, w, /[ \t*]+/)
				name = w[n]
			}
			start = NR; insig = 0; infn = 1; next
		}
		/^[^ \t]/ { insig = 0 }	# anything else in column 0 ends a signature
	' "$f"
done)

rc=0
declare -A seen=()
while read -r lines where func; do
	[[ -z $lines ]] && continue
	file=${where%%:*}
	if [[ -n ${allowed["$file $func"]:-} ]]; then
		seen["$file $func"]=1
		printf '%5d %s %s (allowed)\n' "$lines" "$where" "$func"
	else
		printf '%5d %s %s\n' "$lines" "$where" "$func"
		rc=1
	fi
done < <(sort -rn <<<"$long")
for k in "${!allowed[@]}"; do
	file=${k%% *}
	# Stale only when the file was scanned and the function is no longer long.
	printf '%s\n' "${files[@]}" | xargs -r realpath --relative-to="$top" | grep -qx -- "$file" || continue
	[[ -n ${seen[$k]:-} ]] || echo "long-functions: stale allowlist entry (not over $limit lines): $k"
done
if ((rc)); then
	echo "long-functions: functions over $limit lines (split them by concept, or add 'FILE FUNCTION REASON' to $(realpath --relative-to="$top" "$allow" 2>/dev/null || echo "$allow"))" >&2
fi
exit $rc
