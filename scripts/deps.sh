#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# deps.sh - install the Debian packages listed in scripts/packages.txt that
# are not installed yet.  Idempotent and silent when nothing is missing.
#
#   scripts/deps.sh [--check]
#
#   --check   only list what is missing; exit 1 if anything is
#
# NPROXY_PACKAGES_LIST overrides the list file (for testing).
#
# Needs root, or sudo without a password prompt (sudo -n).  Runs apt-get
# update only when something has to be installed, and installs with
# --no-install-recommends.

set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
list=${NPROXY_PACKAGES_LIST:-$top/scripts/packages.txt}
[[ -r $list ]] || { echo "deps.sh: $list not found" >&2; exit 1; }

mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]\+//g' "$list" | grep -v '^$' | sort -u)
((${#wanted[@]})) || exit 0

command -v dpkg-query >/dev/null || { echo "deps.sh: dpkg-query not found: this script is for Debian" >&2; exit 1; }

# One dpkg-query for all; packages it does not know are simply absent.
installed_pkgs() {
	dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null | awk '$2 == "installed" { print $1 }' || true
}
mapfile -t have < <(installed_pkgs "${wanted[@]}")
missing=()
for p in "${wanted[@]}"; do
	[[ " ${have[*]} " == *" $p "* ]] || missing+=("$p")
done
((${#missing[@]})) || exit 0

if [[ ${1:-} == --check ]]; then
	echo "deps.sh: missing: ${missing[*]}"
	exit 1
fi

if [[ $(id -u) == 0 ]]; then
	as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
	as_root=(sudo -n env DEBIAN_FRONTEND=noninteractive)
else
	echo "deps.sh: missing packages: ${missing[*]}" >&2
	echo "deps.sh: cannot install them: not root and 'sudo -n' is not available." >&2
	echo "deps.sh: run as root: apt-get install --no-install-recommends ${missing[*]}" >&2
	exit 1
fi

echo "deps.sh: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"

# Verify: a package that apt skipped silently is still an error.
mapfile -t have < <(installed_pkgs "${missing[@]}")
still=()
for p in "${missing[@]}"; do
	[[ " ${have[*]} " == *" $p "* ]] || still+=("$p")
done
if ((${#still[@]})); then
	echo "deps.sh: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
echo "deps.sh: done"
