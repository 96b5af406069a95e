#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# nproxy-run's nccl-tests mode (nproxy-run(1), "nccl-tests mode"): the
# links nproxy_all_reduce_perf, nproxy_all_gather_perf and
# nproxy_sendrecv_perf run the collective their name says, with
# nccl-tests' options, sizes and table (the header and row widths are
# nccl-tests' printf formats, src/util.cu); every type and op verifies,
# also for an odd rank count; -c 0 checks nothing (N/A); a corrupted
# element (out-of-place, in place, allgather) is counted in #wrong and
# exits 1 as a wrong result does; -N cycles go inside type and op; --json
# counts as the table; a bad -d or -o names the valid values.  nproxy-run's own mode takes --dtype
# and --op.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run
tap_require_cmd python3 timeout

tap_tmpdir
export NPROXY_HANDSHAKE=memfd
tap_plan 13
AR=$BUILD/bin/nproxy_all_reduce_perf
AG=$BUILD/bin/nproxy_all_gather_perf
SR=$BUILD/bin/nproxy_sendrecv_perf

# nccl-tests' row: size, count, type, redop, root, then per variant time,
# algbw, busbw, #wrong ("%6g", or "N/A" one column narrower, as nccl-tests
# prints it; a skipped variant: 32 blanks).
num="[-0-9.e+ ]"
var="(  $num{7}  $num{6}  $num{6}(  ( {0,5}[0-9]+|[0-9.e+]{6})|    N\/A)| {32})"
row="^[ 0-9]{12}  [ 0-9]{12}  [ a-z0-9]{8}  [ a-z]{6}  [-0-9 ]{6}$var$var\$"

# The header nccl-tests prints, from its own formats.
hdr1=$(printf "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          " "" "" "" "" "")
hdr2=$(printf "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" size count type redop root time algbw busbw "#wrong" time algbw busbw "#wrong" 0 "")
hdr3=$(printf "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" "(B)" "(elements)" "" "" "" "(us)" "(GB/s)" "(GB/s)" "" "(us)" "(GB/s)" "(GB/s)" "" 0 "")

run() { timeout 120 "$@" -T 90 2>&1; }
rows() { grep -v '^#' <<<"$1"; }

# ---- the entry points
ok=1 why=
for t in all_reduce:sum all_gather:none sendrecv:sum; do
	name=${t%%:*} redop=${t#*:} link=$BUILD/bin/nproxy_${name}_perf
	[[ -L $link && $(readlink "$link") == nproxy-run ]] || { ok=0 why+=" $link is not a link to nproxy-run"; continue; }
	out=$(run "$link" -b 1K -e 1K -g 2 -n 2)
	rc=$?
	if ((rc != 0)) || ! grep -q "^# Collective test starting: ${name}_perf\$" <<<"$out" ||
		! grep -Eq "^ +1024 +[0-9]+ +float +$redop +-1 " <<<"$out"; then
		ok=0 why+=" ${name}_perf: exit $rc: $out"
	fi
done
if ((ok)); then tap_ok "the three links run their collective"; else tap_fail "the three links run their collective" "$why"; fi

# ---- -d float -o max: verified, nccl-tests' header and row layout
out=$(run "$AR" -b 8 -e 128 -f 2 -g 2 -d float -o max -n 3)
rc=$?
if ((rc == 0)) && grep -qxF -- "$hdr1" <<<"$out" && grep -qxF -- "$hdr2" <<<"$out" &&
	grep -qxF -- "$hdr3" <<<"$out" && (($(rows "$out" | grep -Ec "$row") == 5)) &&
	(($(rows "$out" | grep -Ec ' float +max +-1 .* 0 +[^ ]+ +[^ ]+ +[^ ]+ +0$') == 5)) &&
	grep -qx "# Out of bounds values : 0 OK" <<<"$out" &&
	grep -Eqx "# Avg bus bandwidth    : [0-9.e+-]+ " <<<"$out"; then
	tap_ok "-d float -o max: 0 wrong, nccl-tests' header, rows and footer"
else
	tap_fail "-d float -o max" "exit $rc" "$out"
fi

# ---- every type x op, and the expectations for an odd rank count
for g in 2 3; do
	out=$(run "$AR" -b 1K -e 1K -g $g -d all -o all -n 2 -w 1)
	rc=$?
	if ((rc == 0)) && (($(rows "$out" | grep -Ec "$row") == 50)) &&
		(($(rows "$out" | awk '$9 == 0 && $13 == 0' | wc -l) == 50)) &&
		grep -qx "# Out of bounds values : 0 OK" <<<"$out"; then
		tap_ok "-d all -o all on $g ranks: 10 types x 5 ops, 0 wrong"
	else
		tap_fail "-d all -o all on $g ranks" "exit $rc" "$out"
	fi
done

# ---- -N 2 -d all: nccl-tests' order, type, op, cycle, size
want=
for t in int8 uint8 int32 uint32 int64 uint64 half float double bfloat16; do
	want+="$t:1024 $t:2048 $t:1024 $t:2048 "
done
out=$(run "$AR" -b 1K -e 2K -f 2 -g 2 -N 2 -d all -n 1 -w 0)
rc=$?
got=$(rows "$out" | awk '{ printf "%s:%s ", $3, $1 }')
if ((rc == 0)) && [[ $got == "$want" ]]; then
	tap_ok "-N 2 -d all: rows type by type, then cycle, then size"
else
	tap_fail "-N 2 -d all: rows type by type, then cycle, then size" "exit $rc" "got:  $got" "want: $want"
fi

# ---- -c 0: nothing checked
out=$(run "$AR" -b 1K -e 4K -f 2 -g 2 -c 0 -n 2)
rc=$?
if ((rc == 0)) && (($(rows "$out" | grep -Ec "$row") == 3)) &&
	(($(rows "$out" | grep -Ec '  N/A  .*  N/A$') == 3)); then
	tap_ok "-c 0: #wrong is N/A"
else
	tap_fail "-c 0: #wrong is N/A" "exit $rc" "$out"
fi

# ---- nccl-tests' sizes for -b 8 -e 64 -f 2 (allgather: a part is 16 B)
out=$(run "$AR" -b 8 -e 64 -f 2 -g 2 -n 1)
rc1=$?
ar=$(rows "$out" | awk '{ printf "%s:%s ", $1, $2 }')
out=$(run "$AG" -b 8 -e 64 -f 2 -g 2 -n 1)
rc2=$?
ag=$(rows "$out" | awk '{ printf "%s:%s ", $1, $2 }')
if ((rc1 == 0 && rc2 == 0)) && [[ $ar == "8:2 16:4 32:8 64:16 " && $ag == "0:0 0:0 32:4 64:8 " ]]; then
	tap_ok "-b 8 -e 64 -f 2: nccl-tests' sizes and counts"
else
	tap_fail "-b 8 -e 64 -f 2: nccl-tests' sizes and counts" "exit $rc1 / $rc2" "all_reduce: $ar" "all_gather: $ag"
fi

# ---- --json: the table's count (an allgather's per rank); -d/-o all say "all"
tab=$(rows "$(run "$AG" -g 2 -b 1K -e 1K -n 1)" | awk '{ print $2 }')
js=$(run "$AG" -g 2 -b 1K -e 1K -n 1 --json)
js_count=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(*sorted({r["count"] for r in d["results"]}))' <<<"$js" 2>&1)
js2=$(run "$AR" -g 2 -b 1K -e 1K -n 1 -d all -o all --json)
job=$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["data_type"], d["reduction_op"], len(d["results"]))' <<<"$js2" 2>&1)
if [[ $tab == 128 && $js_count == 128 && $job == "all all 100" ]]; then
	tap_ok "--json: allgather count as the table's; -d all -o all: data_type and reduction_op all"
else
	tap_fail "--json count and job type/op" "table: $tab" "json: $js_count" "job: $job"
fi

# corrupted DESC CORRUPT ROW ERROR CMD...: with NPROXY_RUN_CORRUPT=CORRUPT the
# run exits 1, exactly one table row holds the awk condition ROW, the footer
# says FAILED and a rank's message matches the basic regex ERROR.
corrupted() {
	local desc=$1 corrupt=$2 row=$3 error=$4 out rc
	shift 4
	out=$(NPROXY_RUN_CORRUPT=$corrupt run "$@")
	rc=$?
	if ((rc == 1)) && (($(rows "$out" | awk "$row" | wc -l) == 1)) &&
		grep -qx "# Out of bounds values : 1 FAILED" <<<"$out" && grep -q "$error" <<<"$out"; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "exit $rc" "$out"
	fi
}

# ---- a corrupted element: counted in #wrong, exit 1
corrupted "a corrupted element: #wrong 1, FAILED, exit 1" 1 \
	'$1 == 1024 && $2 == 512 && $3 == "half" && $4 == "avg" && $5 == -1 && $9 == 1' \
	"nproxy-run: rank 1: allreduce 1024 B iteration [0-9]*: verification error" \
	"$AR" -b 1K -e 2K -f 2 -g 2 -d half -o avg -n 2

# ---- an in-place result corrupted (row 1: the first size in place) is caught
corrupted "an in-place corruption: in-place #wrong 1, out-of-place 0, exit 1" 1:1 \
	'$9 == 0 && $13 == 1' \
	"nproxy-run: rank 1: allreduce 1024 B iteration [0-9]*: verification error .*(float, in place)" \
	"$AR" -b 1K -e 1K -g 2 -n 2

# ---- an allgather's corrupted element (another rank's part)
corrupted "an allgather corruption: #wrong 1, FAILED, exit 1" 0 \
	'$9 == 1 && $13 == 0' \
	"nproxy-run: rank 0: allgather 1024 B iteration [0-9]*: verification error .*(chunk of rank 1)" \
	"$AG" -b 1K -e 1K -g 2 -n 2

# ---- a type or op that does not exist
out1=$(run "$AR" -g 2 -d float8)
rc1=$?
out2=$(run "$AR" -g 2 -o mulsum)
rc2=$?
if ((rc1 == 2 && rc2 == 2)) &&
	grep -q "'float8' is not one of int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, all" <<<"$out1" &&
	grep -q "'mulsum' is not one of sum, prod, max, min, avg, all" <<<"$out2"; then
	tap_ok "unknown -d / -o: usage error naming the valid values"
else
	tap_fail "unknown -d / -o" "exit $rc1 / $rc2" "$out1" "$out2"
fi

# ---- nproxy-run's own mode: --dtype half --op avg
out=$(timeout 120 "$RUN" --collective allreduce --procs 3 --dtype half --op avg --size 3K \
	--iters 3 --warmup 1 --timeout 90 2>&1)
rc=$?
if ((rc == 0)) && grep -Eq '^ +3K +1536 +half +avg +3 .* 0 +[0-9]+$' <<<"$out"; then
	tap_ok "nproxy-run --dtype half --op avg: verified"
else
	tap_fail "nproxy-run --dtype half --op avg" "exit $rc" "$out"
fi
