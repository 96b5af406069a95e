#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxyctl against the loaded module (inside the VM): --version names the
# module's version and ABI next to the tool's; watch stamps every event with
# its receive time, in text and as --json lines.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxyctl
tap_require_root
tap_require_cmd python3 timeout
[[ -e /dev/nproxy ]] || tap_skip_all "/dev/nproxy missing: nproxy.ko not loaded (run under scripts/vmtest)"

tap_tmpdir
version=$(cat "$TOP/VERSION")

tap_plan 4
out=$("$CTL" --version 2>&1)
if [[ $out == *"nproxyctl $version (ABI 1)"*"module: nproxy $version (ABI 1)"* ]]; then
	tap_ok "--version: tool and loaded module, version and ABI"
else
	tap_fail "--version: tool and loaded module" "$out"
fi
out=$("$CTL" --json --version 2>&1)
if python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["module_loaded"] and d["module_version"] == sys.argv[2] and d["module_abi_version"] == 1, d' "$out" "$version"; then
	tap_ok "--json --version: module_version $version, module_abi_version 1"
else
	tap_fail "--json --version" "$out"
fi

# One region created and destroyed while watching: two stamped events each way.
for mode in text json; do
	args=(watch --count 2 --timeout 60)
	[[ $mode == json ]] && args=(--json "${args[@]}")
	timeout 90 "$CTL" "${args[@]}" >"$tmp/$mode" 2>"$tmp/$mode.err" &
	w=$!
	sleep 1
	timeout 30 "$CTL" create --hold 0.2 >/dev/null 2>&1
	wait "$w"
	if [[ $mode == text ]]; then
		if (($(grep -cE '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{6}Z mono=[0-9]+\.[0-9]{6} .*event=' "$tmp/text") == 2)); then
			tap_ok "watch: each event line starts with its UTC time and monotonic seconds"
		else
			tap_fail "watch: timestamped lines" "$(cat "$tmp/text" "$tmp/text.err")"
		fi
	elif python3 - "$tmp/json" <<'PY' 2>"$tmp/py.err"; then
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 2, lines
for e in lines:
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", e["time"]), e
    assert isinstance(e["mono_s"], float) and e["mono_s"] > 0 and "event" in e, e
assert lines[0]["mono_s"] <= lines[1]["mono_s"]
PY
		tap_ok "watch --json: one object per line with time and mono_s"
	else
		tap_fail "watch --json: time and mono_s" "$(cat "$tmp/py.err" "$tmp/json" "$tmp/json.err")"
	fi
done
tap_done
