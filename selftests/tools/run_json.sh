#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run --json: the document parses, carries every documented key with
# the right type, and its numbers agree with the run that produced them
# (sizes as rounded to the ring, bus bandwidth factor, proxy threads per
# process as set by --ranks-per-proxy).  Each collective is verified.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tap_tmpdir
export NPROXY_HANDSHAKE=memfd
# libfabric tcp and udp must stay on loopback (they would otherwise pick eth0).
export FI_TCP_IFACE=lo FI_UDP_IFACE=lo

# run_json DESC JSON-FILE PYTHON-CHECKS -- nproxy-run ARGS...
run_json() {
	local desc=$1 file=$2 checks=$3 rc
	shift 4
	timeout 120 "$RUN" --json --timeout 90 "$@" >"$file" 2>"$file.err"
	rc=$?
	if ((rc != 0)); then
		tap_fail "$desc" "nproxy-run $* exited $rc" "$(cat "$file.err")"
		return
	fi
	if python3 - "$file" "$checks" >"$file.py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
schema = {
    "tool": str, "version": str, "collective": str, "world_size": int, "procs": int,
    "ranks_per_proc": int, "launcher": str, "provider": str, "handshake": str, "shm_copy": str,
    "ranks_per_proxy": (int, str), "one_thread_per_core": bool, "device_delay_us": int,
    "host": str, "pid": int, "data_type": str, "reduction_op": str, "libfabric_version": str,
    "module_abi": (int, type(None)), "iters": int, "timeout_s": (int, float), "sizes_requested": int,
    "warmup": int, "proxy_threads_per_proc": list, "results": list, "status": str,
    "exit_code": int, "error": type(None), "elapsed_s": (int, float),
}
row = {"bytes": int, "iters": int, "median_us": (int, float), "p99_us": (int, float),
       "min_us": (int, float), "max_us": (int, float), "algbw_GBps": (int, float),
       "busbw_GBps": (int, float), "count": int, "p99_is_max": bool, "verified": bool, "verify_errors": int,
       "cpu_s": (int, float), "timed_wall_s": (int, float), "cpu_us_per_op": (int, float)}
for k, t in schema.items():
    assert k in d, "missing key %s" % k
    assert isinstance(d[k], t), "key %s is %r" % (k, d[k])
assert set(d) == set(schema), "unexpected keys %s" % (set(d) - set(schema))
assert d["tool"] == "nproxy-run" and d["status"] == "ok" and d["exit_code"] == 0
# Units and defaults spelt out: GB/s (1e9 B/s) in the names, "default" for an option left alone.
assert d["ranks_per_proxy"] == "default" or d["ranks_per_proxy"] >= 1
assert d["data_type"] == "uint32" and d["reduction_op"] == ("sum" if d["collective"] == "allreduce" else "none")
assert d["sizes_requested"] == len(d["results"]) and d["libfabric_version"].count(".") == 1
for r in d["results"]:
    assert set(r) == set(row), "row keys %s" % sorted(r)
    for k, t in row.items():
        assert isinstance(r[k], t), "row key %s is %r" % (k, r[k])
    assert r["verified"] and r["verify_errors"] == 0
    assert 0 < r["min_us"] <= r["median_us"] <= r["p99_us"] <= r["max_us"]
    assert r["count"] * 4 == r["bytes"] and r["p99_is_max"] == (r["iters"] < 100)
    if r["p99_is_max"]:
        assert r["p99_us"] == r["max_us"]
    assert abs(r["algbw_GBps"] - r["bytes"] / r["median_us"] / 1e3) <= 1e-3 * r["algbw_GBps"] + 1e-9
    # The slowest process's summed op time: positive, at most every iteration at its max.
    assert 0 < r["timed_wall_s"] * 1e6 <= r["max_us"] * r["iters"] * 1.001
    assert r["cpu_s"] > 0
    assert abs(r["cpu_us_per_op"] - r["cpu_s"] * 1e6 / r["iters"]) <= 1e-3 * r["cpu_us_per_op"] + 1e-6
w = d["world_size"]
f = {"allgather": (w - 1) / w, "allreduce": 2 * (w - 1) / w, "sendrecv": 1.0}[d["collective"]]
for r in d["results"]:
    assert abs(r["busbw_GBps"] - r["algbw_GBps"] * f) <= 1e-3 * r["busbw_GBps"] + 1e-9
ok = eval(sys.argv[2])
if not ok:
    print("check failed:", sys.argv[2])
sys.exit(0 if ok else 1)
PY
	then
		tap_ok "$desc"
	else
		tap_fail "$desc" "$(cat "$file.py")" "$(cat "$file")"
	fi
}

run_json "allgather, 4 procs, 2 sizes: schema and values" "$tmp/ag.json" \
	'd["collective"] == "allgather" and d["ranks_per_proxy"] == "default" and d["world_size"] == 4 and d["procs"] == 4 and d["launcher"] == "self" and d["provider"] == "shm" and d["handshake"] == "memfd" and d["shm_copy"].startswith("CMA ") and [r["bytes"] for r in d["results"]] == [1024, 8192] and all(r["iters"] == 3 for r in d["results"]) and d["proxy_threads_per_proc"] == [1, 1, 1, 1]' \
	-- --size 1K,8K --iters 3 --warmup 1

# 3 ranks do not divide 1000: each rank's chunk rounds down to whole words.
run_json "allreduce, 3 procs: size rounded to the ring" "$tmp/ar.json" \
	'd["collective"] == "allreduce" and d["world_size"] == 3 and d["results"][0]["bytes"] == 996' \
	-- --procs 3 --collective allreduce --size 1000 --iters 3 --warmup 1

run_json "sendrecv, 2 procs x 2 ranks, 2 ranks per proxy: one worker per process" "$tmp/sr.json" \
	'd["collective"] == "sendrecv" and d["ranks_per_proxy"] == 2 and d["world_size"] == 4 and d["ranks_per_proc"] == 2 and d["proxy_threads_per_proc"] == [1, 1] and d["results"][0]["bytes"] == 65536' \
	-- --procs 2 --ranks-per-proc 2 --ranks-per-proxy 2 --collective sendrecv --size 64K --iters 3 --warmup 1

run_json "one process, 4 ranks, 1 rank per proxy: four workers" "$tmp/p4.json" \
	'd["procs"] == 1 and d["proxy_threads_per_proc"] == [4]' \
	-- --procs 1 --ranks-per-proc 4 --ranks-per-proxy 1 --size 4K --iters 2 --warmup 0

run_json "allreduce over tcp;ofi_rxm on lo, busy-spinning workers" "$tmp/tcp.json" \
	'd["provider"] == "tcp;ofi_rxm" and d["one_thread_per_core"] is True and d["results"][0]["verified"]' \
	-- --procs 2 --collective allreduce --provider 'tcp;ofi_rxm' --one-thread-per-core --size 256K --iters 3 --warmup 1

# RDM over datagrams, shaped like EFA's RDM over SRD, with EFA's memory
# registration (every buffer registered, its descriptor on every op).
NPROXY_NET_MR_MODE=efa run_json "allreduce over udp;ofi_rxd on lo, EFA's registration modes" "$tmp/rxd_ar.json" \
	'd["provider"] == "udp;ofi_rxd" and all(r["verified"] and r["verify_errors"] == 0 for r in d["results"])' \
	-- --procs 2 --collective allreduce --provider 'udp;ofi_rxd' --size 256K --iters 3 --warmup 1
NPROXY_NET_MR_MODE=efa run_json "allgather over udp;ofi_rxd on lo, 4 procs, EFA's registration modes" "$tmp/rxd_ag.json" \
	'd["provider"] == "udp;ofi_rxd" and d["world_size"] == 4 and all(r["verified"] and r["verify_errors"] == 0 for r in d["results"])' \
	-- --procs 4 --collective allgather --provider 'udp;ofi_rxd' --size 64K --iters 3 --warmup 1
tap_done
