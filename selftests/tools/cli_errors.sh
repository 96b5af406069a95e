#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Command-line errors of nproxy-run and nproxyctl: exit status 2 and a
# message naming the bad argument; --help/--version; launcher environment
# errors; nproxyctl's program parser (FILE:LINE messages); and, on a host
# without the module, nproxyctl's "not loaded" message and exit status 3.
. "${NPROXY_TOP:-${NPROXY_BUILD:-$(dirname "$0")/../..}/..}/scripts/tap.sh"
tap_use_build nproxy-run nproxyctl

tap_tmpdir

# expect DESC STATUS REGEX CMD...: CMD, outside any launcher, exits STATUS
# and its stderr+stdout matches REGEX.
expect() {
	local desc=$1 want=$2 re=$3
	shift 3
	tap_expect "$desc" "$want" "$re" env -u NPROXY_RANK -u OMPI_COMM_WORLD_RANK \
		-u SLURM_PROCID -u PMIX_RANK timeout 60 "$@"
}

# nproxy-run
expect "run: unknown option" 2 "unknown option '--bogus'" "$RUN" --bogus
expect "run: missing argument" 2 "needs an argument" "$RUN" --procs
expect "run: --procs 0" 2 "--procs: '0' is not 1..64" "$RUN" --procs 0
expect "run: --procs abc" 2 "--procs: 'abc'" "$RUN" --procs abc
expect "run: --procs 65" 2 "--procs: '65'" "$RUN" --procs 65
expect "run: one rank in all" 2 "needs at least 2 ranks" "$RUN" --procs 1
expect "run: too many ranks" 2 "at most 64" "$RUN" --procs 16 --ranks-per-proc 8
expect "run: bad collective" 2 "--collective: 'alltoall'" "$RUN" --collective alltoall
expect "run: bad size suffix" 2 "--size: '5X'" "$RUN" --size 5X
expect "run: zero size" 2 "--size: '0'" "$RUN" --size 0
expect "run: inverted sweep" 2 "--size: '1M:1K'" "$RUN" --size 1M:1K
expect "run: size too large" 2 "--size: '1G'" "$RUN" --size 1G
expect "run: bad handshake" 2 "--handshake: 'pci'" "$RUN" --handshake pci
expect "run: size above the cap says so" 2 "--size: '1G' is not a size of at most 256M: above the 256M cap" "$RUN" --size 1G
expect "run: unknown unit named" 2 "--size: '5X' is not a number of bytes: unknown unit 'X'" "$RUN" --size 5X
expect "run: not a number" 2 "--size: 'K' is not a number of bytes" "$RUN" --size K
expect "run: empty list element" 2 "--size: '1K,,2K' is not a size list: an empty size in the list" "$RUN" --size 1K,,2K
expect "run: inverted sweep says which" 2 "minimum 1048576 B is above its maximum 1024 B" "$RUN" --size 1M:1K
expect "run: sweep factor 1" 2 "factor is at least 2" "$RUN" --size 1K:8K:1
expect "run: sweep shape" 2 "a sweep is MIN:MAX or MIN:MAX:FACTOR" "$RUN" --size 1:2:3:4
expect "run: -t is not a timeout" 2 "-t is not an nproxy-run option: in nccl-tests it is threads" "$RUN" -t 2
expect "run: -s with -b" 2 "-s and -b/-e/-f both give the sizes" "$RUN" -s 4K -b 1K
expect "run: -f 1" 2 "--stepfactor: '1'" "$RUN" -b 1K -e 4K -f 1
expect "run: -e below -b" 2 "minimum 4096 B is above its maximum 1024 B" "$RUN" -b 4K -e 1K
expect "run: -b 1G" 2 "--minbytes: '1G' is not a size of at most 256M" "$RUN" -b 1G
# nccl-tests mode: a long-only option by its name, the hint by the invoked name.
AR=$BUILD/bin/nproxy_all_reduce_perf
expect "nccl-tests mode: --procs 0 named" 2 "^nproxy-run: --procs: '0' is not 1\\.\\.64\$" "$AR" --procs 0
expect "nccl-tests mode: -g 0 named" 2 "^nproxy-run: -g: '0' is not 1\\.\\.64\$" "$AR" -g 0
expect "nccl-tests mode: the hint names the program run" 2 "^Try 'nproxy_all_reduce_perf --help'\\.\$" "$AR" --procs 0
# Every timed op's latency is kept: -n x -m and the record are bounded.
expect "nccl-tests mode: -n x -m above 1000000" 2 "-n 100000 x -m 11 = 1100000 timed operations per size: at most 1000000" "$AR" -n 100000 -m 11
expect "nccl-tests mode: a latency record too large" 2 "100 result rows x 1000000 timed iterations: a 0.80 GB latency record per process, at most 0.54 GB" \
	"$AR" -n 100000 -m 10 -d all -o all
expect "own mode: the hint names nproxy-run" 2 "^Try 'nproxy-run --help'\\.\$" "$RUN" --procs 0
if [[ ! -e /dev/nproxy ]]; then
	expect "run: --handshake kmod without the module, in the user's terms" 5 \
		"^nproxy-run: --handshake kmod: /dev/nproxy does not exist: the nproxy module is not loaded" \
		"$RUN" --handshake kmod -p 2 -s 4K
fi
expect "run: library log lines carry monotonic time, level and thread" 5 \
	"^nproxy\\[[0-9]+\\] [0-9]+\\.[0-9]{6} error [^ :]+: rank 0: options: provider 'nosuch'" \
	env -u NPROXY_HANDSHAKE NPROXY_HANDSHAKE=memfd "$RUN" --provider nosuch -p 2 -s 4K -n 1 --timeout 60
expect "run: a bad --provider lists the available ones" 5 "provider 'nosuch' is not available here \\(libfabric offers: .*'shm'" \
	env -u NPROXY_HANDSHAKE NPROXY_HANDSHAKE=memfd "$RUN" --provider nosuch -p 2 -s 4K -n 1 --timeout 60
expect "run: negative timeout" 2 "--timeout: '-1' is not a number of seconds .*no '\\+' or '-' sign" "$RUN" --timeout -1
expect "run: zero iters" 2 "--iters: '0'" "$RUN" --iters 0
expect "run: a '+' is refused, and the message says why" 2 "--procs: '\\+2' is not 1..64: no '\\+' or '-' sign" "$RUN" --procs +2
expect "run: trailing junk" 2 "--iters: '5x' is not 1..1000000: trailing 'x'" "$RUN" --iters 5x
expect "run: -f is a whole factor" 2 "--stepfactor: '2K' is not 2..268435456: trailing 'K'" "$RUN" -b 1K -f 2K
expect "run: stray argument" 2 "unexpected argument 'foo'" "$RUN" foo
expect "run: --help" 0 "--ranks-per-proc" "$RUN" --help
expect "run: --version" 0 "^nproxy-run [0-9]+\\.[0-9]+" "$RUN" --version
expect "run: launcher rank without size" 2 "NPROXY_WORLD_SIZE is not" env NPROXY_RANK=0 "$RUN"
expect "run: launcher rank >= size" 2 "NPROXY_RANK=3 is not below NPROXY_WORLD_SIZE=2" \
	env NPROXY_RANK=3 NPROXY_WORLD_SIZE=2 "$RUN"
expect "run: launcher without root address" 2 "NPROXY_ROOT_COMM_ID" \
	env NPROXY_RANK=0 NPROXY_WORLD_SIZE=2 "$RUN"
expect "run: launcher and --procs conflict" 2 "--procs conflicts with the launcher" \
	env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 NPROXY_ROOT_COMM_ID=127.0.0.1:1 "$RUN" --procs 2
expect "run: non-numeric launcher variable" 2 "SLURM_PROCID='x'" env SLURM_STEP_ID=0 SLURM_PROCID=x SLURM_NTASKS=2 "$RUN"

# nproxyctl
expect "ctl: no command" 2 "missing command" "$CTL"
expect "ctl: unknown command" 2 "unknown command 'frob'" "$CTL" frob
expect "ctl: info takes no arguments" 2 "info takes no arguments" "$CTL" info extra
expect "ctl: bad sem op" 2 "unknown sem operation 'dec'" "$CTL" sem dec 1 0 1
expect "ctl: sem set without value" 2 "wrong number of arguments" "$CTL" sem set 1 0
expect "ctl: trigger usage" 2 "usage: trigger REGION STREAM" "$CTL" trigger
expect "ctl: bad region name" 2 "bad region 'x:y'" "$CTL" trigger x:y 0
expect "ctl: bad --count" 2 "--count: '0'" "$CTL" watch --count 0
expect "ctl: --help" 0 "program REGION FILE" "$CTL" --help
expect "ctl: help" 0 "nproxyctl help \\[COMMAND\\]" "$CTL" help
expect "ctl: sem --help is sem's" 0 "^Usage: nproxyctl \\[--json\\] sem get REGION SEM" "$CTL" sem --help
expect "ctl: help watch" 0 "^Usage: nproxyctl \\[--json\\] watch \\[--count N\\]" "$CTL" help watch
expect "ctl: help of an unknown command" 2 "unknown command 'frob'" "$CTL" help frob
# expect_json DESC REGEX CMD...: CMD exits 2, its stdout alone is one line matching REGEX.
expect_json() {
	local desc=$1 re=$2 out rc
	shift 2
	out=$(env -u NPROXY_RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMIX_RANK \
		timeout 60 "$@" 2>/dev/null)
	rc=$?
	if ((rc == 2)) && [[ $(wc -l <<<"$out") == 1 ]] && grep -Eq -- "$re" <<<"$out"; then
		tap_ok "$desc"
	else
		tap_fail "$desc" "command: $*" "exit $rc (want 2), stdout must be one line matching /$re/:" "$out"
	fi
}
expect_json "run: --json bad value is JSON on stdout" \
	'^\{"tool":"nproxy-run","status":"usage-error","exit_code":2,"error":"--procs: .0. is not 1\.\.64"\}$' \
	"$RUN" --json --procs 0
expect_json "run: --json after the mistake, unknown option" \
	'^\{"tool":"nproxy-run","status":"usage-error","exit_code":2,"error":"unknown option .--bogus."\}$' \
	"$RUN" --bogus --json
expect_json "run: -qj, one rank in all" \
	'^\{"tool":"nproxy-run","status":"usage-error","exit_code":2,"error":"allgather needs at least 2 ranks' \
	"$RUN" -qj --procs 1
expect "run: without --json the error is text" 2 "^nproxy-run: --procs: '0'" "$RUN" --procs 0
expect "ctl: --json usage error is JSON" 2 '^\{"status":"usage-error","error":"unknown command .frob."\}$' "$CTL" --json frob
expect "ctl: --json unknown option is JSON" 2 '^\{"status":"usage-error","error":"unknown option' "$CTL" --json --bogus
expect "ctl: --version says whether a module is loaded" 0 "^module: " "$CTL" --version
expect "ctl: --version" 0 "^nproxyctl [0-9.]+ \\(ABI 1\\)" "$CTL" --version
expect "ctl: a '+' is refused in the same words as nproxy-run" 2 "--count: '\\+2' is not a positive integer: no '\\+' or '-' sign" "$CTL" watch --count +2
expect "ctl: a bad STREAM names the argument" 2 "STREAM: 'x' is not an unsigned integer" "$CTL" trigger 1 x
expect "ctl: a bad sem VALUE names the argument" 2 "VALUE: '-1' is not an unsigned integer: no '\\+' or '-' sign" "$CTL" sem set 1 0 -- -1
expect "ctl: a negative operand is not taken for an option" 2 "trigger: '-1' is not an option, and values are unsigned" "$CTL" trigger 1 -1
expect "ctl: --interval below 0.05" 2 "--interval: '0.01' is not a number of seconds in \\[0.05, 86400\\]" "$CTL" top --interval 0.01
expect "ctl: a command's option before the command is refused" 2 "unknown option '--count' before the command" "$CTL" --count 3 watch
expect "ctl: an option of another command" 2 "info: unknown option '--reset'" "$CTL" info --reset
expect "ctl: option without its argument" 2 "watch: option '--count' needs an argument" "$CTL" watch --count
expect "ctl: help --list names every command, one a line" 0 \
	"^info regions stats watch state sem trigger program create top hang-report shm-sweep help $" \
	bash -c '"$1" help --list | tr "\n" " "' _ "$CTL"
expect "ctl: --help before a command is its help" 0 "^Usage: nproxyctl \\[--json\\] stats \\[--reset\\]" "$CTL" --help stats
expect "ctl: hang-report --help" 0 "Exit 5 when a hang is found" "$CTL" hang-report --help
expect "ctl: --json after the command" 2 '^\{"status":"usage-error","error":"usage: state REGION"\}$' "$CTL" state --json
expect "ctl: shm-sweep takes no arguments" 2 "shm-sweep takes no arguments" "$CTL" shm-sweep x
expect "ctl: shm-sweep --pid 0" 2 "--pid: '0' is not a process id" "$CTL" shm-sweep --pid 0
expect "ctl: shm-sweep of a missing directory" 1 "cannot sweep /nonexistent" "$CTL" shm-sweep --dir /nonexistent/nproxy

# The program text format (parsed on the host: no module needed).
cat >"$tmp/good.txt" <<'PROG'
# a comment line
write-trigger 0 1
wait-sem 2 >= 5 timeout 100ms   # trailing comment
delay 50us

inc-sem 1 1
signal 7
PROG
expect "ctl: program --check parses every step kind" 0 \
	"^0: write-trigger 0 1
1: wait-sem 2 >= 5 timeout 100ms
2: delay 50us
3: inc-sem 1 1
4: signal 7$" "$CTL" program --check "$tmp/good.txt"
# bad_program NAME TEXT DESC REGEX: program --check refuses TEXT (\n for
# a newline) in NAME.txt with exit 2 and a message matching REGEX.
bad_program() {
	printf "%b" "$2" >"$tmp/$1.txt"
	expect "ctl: $3" 2 "$4" "$CTL" program --check "$tmp/$1.txt"
}
bad_program b1 'delay 1us\n\nfrobnicate 3\n' "unknown step names file:line" "b1.txt:3: unknown step 'frobnicate'"
bad_program b2 'wait-sem 1 > 3\n' "wait-sem without >=" "b2.txt:1: expected '>='"
bad_program b3 'write-trigger 4 1\n' "stream out of range" "b3.txt:1: stream '4' is not 0..3"
bad_program b4 'delay 61s\n' "delay beyond 60 s" "b4.txt:1: delay '61s'"
bad_program b5 'delay 5\n' "duration without unit" "b5.txt:1: delay '5' is not a duration"
bad_program b6 '# only a comment\n' "empty program" "no steps"
expect "ctl: missing program file" 1 "nope.txt: No such file" "$CTL" program --check "$tmp/nope.txt"
expect "ctl: --json program --check prints JSON" 0 '^\{"file":".*good.txt","steps":\["write-trigger 0 1",' \
	"$CTL" --json program --check "$tmp/good.txt"
expect "ctl: --json program --check error is JSON" 2 '^\{"status":"(usage-)?error","error":".*b1.txt:3: unknown step' \
	"$CTL" --json program --check "$tmp/b1.txt"

# Without the module (the host): clear message, exit 3.
if [[ -e /dev/nproxy ]]; then
	tap_skip "ctl: module not loaded" "/dev/nproxy exists here"
	tap_skip "ctl: regions without the module" "/dev/nproxy exists here"
	tap_skip "ctl: trigger without the module" "/dev/nproxy exists here"
else
	expect "ctl: module not loaded" 3 "/dev/nproxy not found: is nproxy.ko loaded\\? \\(modprobe nproxy\\)" "$CTL" info
	expect "ctl: regions without the module" 3 "is nproxy.ko loaded" "$CTL" regions
	expect "ctl: trigger without the module" 3 "is nproxy.ko loaded" "$CTL" trigger 1 0
fi
tap_done
