#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/words-check.sh (run by `make lint`) fails on each kind of word
# from outside the project and on story prose, names the file and line,
# leaves look-alikes that are ours alone (shell ${v#1}, colours, b1.txt,
# "is used to wait", "once the rank failed"), and the tree itself is clean.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
check=$top/scripts/words-check.sh
[[ -x $check ]] || tap_skip_all "no $check"

work=$(mktemp -d "${TMPDIR:-/tmp}/nproxy-words.XXXXXX") || tap_skip_all "cannot create a temp dir"
trap 'rm -rf "$work"' EXIT

# The words are assembled at run time so that this file stays clean.
s=s; h=h; w=w; i=i; n=4; f=f; o=o; t=t; c=c
declare -A bad=(
	[nickname]="as the ${s}eed says"
	[section]="see ${s}eed §$n"
	[issue]="fixed by ${i}ssue 12"
	[hashref]="/* see #""12 */"
	[label]="start (B""1) validates"
	[workpath]="/${w}ork/shared/notes.txt"
	[homepath]="cp /${h}ome/someone/x ."
)
# Story prose: kind|line.
while IFS='|' read -r kind line; do
	bad[$kind]=$line
done <<EOF
foundbug|the first run ${f}ound a bug in the fuzzer
wefound|${w}e found that the root waits
oncefailed|the job ${o}nce failed in 5 of 7 runs
usedto|the root used ${t}o retry the bind
oldcode|reproduces the message on the ${o}ld code
abichange|*Later ABI ${c}hange:* prog_step took reserved32
EOF

tap_plan $((${#bad[@]} + 2))
for kind in "${!bad[@]}"; do
	dir=$work/$kind
	mkdir -p "$dir"
	printf 'first line\n%s\n' "${bad[$kind]}" >"$dir/page.md"
	out=$("$check" "$dir" 2>&1)
	rc=$?
	if ((rc == 1)) && grep -q "page.md:2:" <<<"$out"; then
		tap_ok "$kind: fails and names page.md:2"
	else
		tap_fail "$kind: fails and names page.md:2" "exit $rc, output:" "$out"
	fi
done

dir=$work/clean
mkdir -p "$dir"
printf '%s\n' 'plan=${line#1..}' 'color = "#1f77b4" "#123456"' 'printf x >"$tmp/b1.txt"' \
	'the reference runtime (libnrt / libnccom)' '/usr/work/x' 'open issues' 'seeds 1234' \
	'the fd is used to wait' 'once the rank failed' 'found no region' 'the old region' \
	'## 0.2.0: ABI changes' >"$dir/ours.sh"
out=$("$check" "$dir" 2>&1)
rc=$?
if ((rc == 0)); then tap_ok "look-alikes of our own pass"
else tap_fail "look-alikes of our own pass" "exit $rc, output:" "$out"; fi

out=$("$check" "$top" 2>&1)
rc=$?
if ((rc == 0)); then tap_ok "the tree is in its own words"
else tap_fail "the tree is in its own words" "exit $rc, output:" "$out"; fi
tap_done
