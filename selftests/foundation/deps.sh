#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# scripts/deps.sh: every package in scripts/packages.txt is installed (make
# check ran it first), so a second run is silent, changes nothing and exits 0.
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}

tap_require_cmd dpkg-query
tap_plan 3
out=$("$top/scripts/deps.sh" --check 2>&1)
rc=$?
if [[ $rc == 0 && -z $out ]]; then
	tap_ok "every package in scripts/packages.txt is installed"
else
	tap_fail "every package in scripts/packages.txt is installed" "$out"
fi
out=$("$top/scripts/deps.sh" 2>&1)
rc=$?
if [[ $rc == 0 && -z $out ]]; then
	tap_ok "deps.sh is silent and succeeds when nothing is missing"
else
	tap_fail "deps.sh is silent and succeeds when nothing is missing" "exit $rc" "$out"
fi
list=$(mktemp) || tap_skip_all "mktemp failed"
trap 'rm -f "$list"' EXIT
printf '# comment\n\nnproxy-selftest-no-such-package # trailing comment\n' >"$list"
out=$(NPROXY_PACKAGES_LIST=$list "$top/scripts/deps.sh" --check 2>&1)
rc=$?
if [[ $rc == 1 && $out == *"missing: nproxy-selftest-no-such-package" ]]; then
	tap_ok "--check reports a missing package and ignores comments"
else
	tap_fail "--check reports a missing package and ignores comments" "exit $rc" "$out"
fi
tap_done
