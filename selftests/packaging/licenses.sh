#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Every source file names its license with an SPDX tag, every license named
# has its text in LICENSES/, and each part carries the license COPYING
# promises (the library and its headers usable by non-GPL runtimes, the uapi
# header under the syscall note, the module GPL).
. "${NPROXY_TOP:-$(dirname "$0")/../../..}/scripts/tap.sh"
top=${NPROXY_TOP:-$(cd "$(dirname "$0")/../../.." && pwd -P)}
cd "$top" || tap_skip_all "no source tree at $top"

if [[ -e .git ]] && command -v git >/dev/null; then
	mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
	mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o \
		-path ./debian -prune -o -type f -print | sed 's|^\./||' | sort)
fi
((${#files[@]})) || tap_skip_all "no source files found under $top"

# Source files: code, build files, scripts, man pages, shipped config.
is_source() {
	case $1 in
	LICENSES/* | debian/*) return 1 ;;
	*.c | *.h | *.sh | *.mk | Makefile | */Makefile | Kbuild | */Kbuild | *.rules | \
		*.map | *.pc.in | dkms.conf | */dkms.conf | dist/* | Documentation/man/*.[1-8] | \
		scripts/* | .ci/*) return 0 ;;
	esac
	return 1
}

spdx_of() { sed -n '1,3{s/.*SPDX-License-Identifier: *\([^*]*\).*/\1/p}' "$1" | sed 's/[[:space:]]*$//' | head -n1; }

tap_plan 6

missing=() unknown=()
declare -A used=()
for f in "${files[@]}"; do
	is_source "$f" || continue
	[[ -f $f ]] || continue
	tag=$(spdx_of "$f")
	if [[ -z $tag ]]; then
		missing+=("$f")
		continue
	fi
	for id in $(sed 's/[()]/ /g; s/ OR / /g; s/ AND / /g; s/ WITH / /g' <<<"$tag"); do
		used[$id]=1
		[[ -f LICENSES/preferred/$id || -f LICENSES/exceptions/$id ]] || unknown+=("$f: $id")
	done
done
if ((${#missing[@]} == 0)); then tap_ok "every source file has an SPDX-License-Identifier"
else tap_fail "every source file has an SPDX-License-Identifier" "no tag in:" "${missing[@]}"; fi
if ((${#unknown[@]} == 0)); then tap_ok "every license named has its text in LICENSES/ (${!used[*]})"
else tap_fail "every license named has its text in LICENSES/" "${unknown[@]}"; fi

# part GLOB... : every such file must carry exactly $want.
wrong_tag() {
	local want=$1 f
	shift
	for f in "${files[@]}"; do
		for g in "$@"; do
			# shellcheck disable=SC2053
			[[ $f == $g ]] || continue
			[[ $(spdx_of "$f") == "$want" ]] || echo "$f: '$(spdx_of "$f")'"
		done
	done
}
bad=$(wrong_tag "LGPL-2.1 OR BSD-2-Clause" 'lib/*.[ch]' 'include/nproxy/*.h' lib/libnproxy.map \
	'examples/*')
if [[ -z $bad ]]; then tap_ok "library, public headers and examples: LGPL-2.1 OR BSD-2-Clause"
else tap_fail "library, public headers and examples: LGPL-2.1 OR BSD-2-Clause" "$bad"; fi
bad=$(wrong_tag "GPL-2.0 WITH Linux-syscall-note" include/uapi/linux/nproxy.h)
if [[ -z $bad ]]; then tap_ok "uapi header: GPL-2.0 WITH Linux-syscall-note"
else tap_fail "uapi header: GPL-2.0 WITH Linux-syscall-note" "$bad"; fi
bad=$(wrong_tag "GPL-2.0" 'kmod/*.[ch]' 'tools/*.[ch]')
grep -q 'MODULE_LICENSE("GPL")' kmod/main.c || bad+=" kmod/main.c: MODULE_LICENSE is not GPL"
if [[ -z $bad ]]; then tap_ok "module and tools: GPL-2.0"
else tap_fail "module and tools: GPL-2.0" "$bad"; fi

# COPYING and debian/copyright name every license the tree uses.
bad=
for id in "${!used[@]}"; do
	grep -qw -- "$id" COPYING || bad+=" COPYING lacks $id;"
	if [[ -f debian/copyright ]]; then grep -qw -- "$id" debian/copyright || bad+=" debian/copyright lacks $id;"; fi
done
if [[ -z $bad ]]; then tap_ok "COPYING (and debian/copyright) name every license used"
else tap_fail "COPYING (and debian/copyright) name every license used" "$bad"; fi
tap_done
