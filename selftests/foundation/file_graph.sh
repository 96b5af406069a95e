#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/file-graph.py (make lint-tools) fails on a call cycle between the
# files of a folder and names it, passes a graph without one (calls into a
# leaf file), reads only the objects of existing sources with --sources,
# and finds no cycle in the built tools/.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
graph=$top/scripts/file-graph.py
[[ -f $graph ]] || tap_skip_all "no $graph"
tap_require_cmd cc
tap_require_cmd nm
tap_require_cmd python3
tap_tmpdir

# expect_graph NAME EXIT REGEX ARGS...: file-graph.py ARGS exits EXIT and
# prints a line matching REGEX.
expect_graph() {
	local name=$1 want=$2 re=$3 out rc
	shift 3
	out=$(python3 "$graph" "$@" 2>&1)
	rc=$?
	if ((rc == want)) && grep -Eq -- "$re" <<<"$out"; then
		tap_ok "$name"
	else
		tap_fail "$name" "exit $rc (want $want), no line matching '$re' in:" "$out"
	fi
}

# compile NAME SOURCE: $tmp/obj/NAME.o from the C text SOURCE.
compile() {
	printf '%b' "$2" >"$tmp/$1.c"
	cc -c -o "$tmp/obj/$1.o" "$tmp/$1.c" || tap_skip_all "cc cannot build $1.c"
}

mkdir -p "$tmp/obj" "$tmp/src"
tap_plan 5

# a and b call each other; leaf calls nobody.
compile a 'int b(int);\nint leaf(int);\nint a(int x) { return x ? b(x - 1) : leaf(x); }\n'
compile b 'int a(int);\nint b(int x) { return x ? a(x - 1) : 0; }\n'
compile leaf 'int leaf(int x) { return x + 1; }\n'
expect_graph "a cycle fails and is named" 1 '^  a <-> b$' "$tmp/obj"

compile b 'int b(int x) { return x; }\n'
expect_graph "calls down into other files pass" 0 '^  a -> b leaf$' "$tmp/obj"

# stale.o and b.o call each other, but only a.c, b.c and leaf.c are sources.
compile b 'int b_back(int);\nint b(int x) { return b_back(x); }\n'
compile stale 'int b(int);\nint b_back(int x) { return x ? b(x - 1) : 0; }\n'
cp "$tmp/a.c" "$tmp/b.c" "$tmp/leaf.c" "$tmp/src/"
expect_graph "every object is read without --sources" 1 '^  b <-> stale$' "$tmp/obj"
expect_graph "--sources leaves out the object of a removed source" 0 \
	'^call cycles between files: 0$' --sources "$tmp/src" "$tmp/obj"

build=${NPROXY_BUILD:-$top/build}
if ls "$build"/tools/*.o >/dev/null 2>&1; then
	expect_graph "tools/ has no file cycle" 0 '^call cycles between files: 0$' \
		--sources "$top/tools" "$build/tools"
else
	tap_skip "tools/ has no file cycle" "no objects in $build/tools (build first)"
fi
tap_done
