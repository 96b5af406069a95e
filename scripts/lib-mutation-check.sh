#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# lib-mutation-check.sh - show that the selftests catch a library with one
# point of its contract broken (the counterpart of kmod/mutation-check.sh).
# Each mutation below is a one-line change to lib/ (or its public header)
# that the suite once let through.  For each: copy the tree,
# apply the change, build the library and the test programs named, run
# them, and expect at least one to fail (or to fail to build: the static
# asserts).  A mutant "survives" when every named program passes; the
# script then exits 1.
#
#   scripts/lib-mutation-check.sh [name...]   (after `make`: reuses build/kselftest)
#
# Not part of `make check`: eighteen library rebuilds and their test runs
# (~5 min on an idle 2-CPU box).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
work=$(mktemp -d /tmp/nproxy-lib-mutants.XXXXXX)
trap 'rm -rf "$work"' EXIT
per_test_timeout=${NPROXY_MUTANT_TIMEOUT:-300}

# name # file # perl substitution (applied with -0pe) # test programs (area/name, space-separated)
mutants=(
	"affinity-reapplied-on-join#lib/proxy/proxy_registry.c#s|node->refcnt\+\+;\t\t/\* SHARE: the queue and its worker are reused \*/|node->refcnt++; { const char *e = getenv(\"NPROXY_PROXY_CPUSET\"); cpu_set_t s; if (e && *e && parse_cpu_list(e, &s) == NPROXY_SUCCESS) pthread_setaffinity_np(node->queue->thread, sizeof(s), &s); }|#proxy/proxy_contract proxy/proxy_registry"
	"destroy-does-not-wake-worker#lib/proxy/proxy_queue.c#s|npx_proxy_queue_unlock\(q\);\n\twake_signal\(&q->wake\);\n\tif \(q->started\)|npx_proxy_queue_unlock(q);\n\tif (q->started)|#proxy/proxy_contract proxy/proxy_registry proxy/proxy_loop"
	"run-states-renumbered#include/nproxy/proxy.h#s|WAITING_DEVICE_TRIGGER = 2,\n\tNPROXY_TASK_STATE_IDLE\t\t\t= 3,|WAITING_DEVICE_TRIGGER = 3,\n\tNPROXY_TASK_STATE_IDLE\t\t\t= 2,|#proxy/proxy_contract proxy/proxy_net_task proxy/proxy_loop"
	"bananaphone-wake-dropped#lib/bananaphone/bananaphone_wait.c#s|\tfutex_wake\(&rc->bell\);|\t(void)futex_wake;|#bananaphone/wake bananaphone/barrier"
	"run-state-before-status#lib/proxy/proxy_internal.h#s|(\t__atomic_store_n\(&st->progress_status, \(int\)rc, __ATOMIC_RELAXED\);\n)(\tproxy_state_task_state\(st->pub, \(uint32_t\)rs, \(int\)rc\);\n)(\twake_word_store\(&st->run_state, &st->sleepers, \(uint32_t\)rs\);\n)|\$3\$1\$2|#proxy/proxy_contract proxy/proxy_loop"
	"stop-error-ignored#lib/proxy/proxy_net_task.c#s|(rc = nt->seam.ops->stop\(nt->seam.engine, s, bb\);\n\t\t\tif \()rc != NPROXY_SUCCESS|\${1}0|#proxy/proxy_net_task"
	"eagain-deadline-unchecked#lib/net/net_engine.c#s|if \(b->eagain_since_ms && now - b->eagain_since_ms > net->timeout_ms\)|if (0)|#proxy/proxy_engine"
	"last-release-does-not-join#lib/proxy/proxy_queue.c#s|if \(q->started\)\n\t\tpthread_join\(q->thread, NULL\);|if (q->started)\n\t\tpthread_detach(q->thread);|#proxy/proxy_contract proxy/proxy_registry"
	"trigger-gate-ignored#lib/proxy/proxy_task.c#s|== NPROXY_PROXY_TRIGGER_SENTINEL\)\n\t\t\treturn false;|== NPROXY_PROXY_TRIGGER_SENTINEL)\n\t\t\treturn true;|#net/net_proxy_ring"
	"engine-completion-not-counted#lib/net/net_cq.c#s|nproxy_device_sem_add\(&b->dev, ready->post_sem, ready->post_inc\);|(void)ready;|#proxy/proxy_engine"
	"opts-tail-unchecked#lib/common/opts.c#s|if \(bytes\[i\]\) \{|if (bytes[i] && 0) {|#bananaphone/join handshake/handshake_backend"
	"opts-size-zero-accepted#lib/common/opts.c#s|if \(size == 0\) \{|if (0) {|#handshake/handshake_backend proxy/proxy_registry"
	"unknown-status-unnumbered#lib/common/status.c#s|return unknown;|return \"NPROXY_UNKNOWN\";|#common/status_names"
	"not-found-is-failure#lib/proxy/proxy_task.c#s|return npx_comm_note\(comm, NPROXY_NOT_FOUND,|return npx_comm_note(comm, NPROXY_FAILURE,|#proxy/proxy_loop"
	"env-takes-a-sign#lib/common/env.c#s|\tif \(\*text < '0'[^\n]*\n\t\treturn -1;\n||#common/common_env"
	"rank-open-failure-leaks#lib/rank/rank.c#s|\trank_release\(r, st != NPROXY_PEER_DEAD\);|\t;|#rank/fault_sweep"
	"rank-idle-policy-ignores-cpus#lib/rank/rank.c#s|return NPROXY_IDLE_ADAPTIVE_YIELD;|return NPROXY_IDLE_DEFAULT;|#rank/open_close"
	"rank-provider-unchecked#lib/rank/rank.c#s|st = check_provider\(r, opts->provider\);|st = check_provider(r, NULL);|#rank/bad_options"
)

[[ -f $top/build/kselftest/kselftest_harness.h ]] ||
	{ echo "lib-mutation-check: run make first (build/kselftest missing)" >&2; exit 1; }
# One scratch copy of the sources, one build directory: each mutant only
# rebuilds what its file touches.
tree=$work/tree
mkdir -p "$tree" "$work/build"
(cd "$top" && git ls-files -co --exclude-standard -- VERSION lib include selftests scripts |
	cpio -pdm --quiet "$tree")
cp -a "$top/build/kselftest" "$work/build/"
nice -n 10 make -s -C "$tree/lib" O="$work/build" >"$work/baseline.log" 2>&1 ||
	{ echo "lib-mutation-check: the unmutated library does not build:"; cat "$work/baseline.log"; exit 1; } >&2

only=("$@")
total=0 caught=0 survived=()
for m in "${mutants[@]}"; do
	IFS='#' read -r name file expr tests <<<"$m"
	if (( ${#only[@]} )) && [[ " ${only[*]} " != *" $name "* ]]; then
		continue
	fi
	total=$((total + 1))
	log=$work/$name.log
	perl -0pi -e "$expr" "$tree/$file"
	if cmp -s "$tree/$file" "$top/$file"; then
		echo "lib-mutation-check: $name: the mutation no longer applies to $file" >&2
		exit 1
	fi
	verdict=
	if ! nice -n 10 make -s -C "$tree/lib" O="$work/build" >"$log" 2>&1; then
		# A mutant must be a library that builds: fix the mutation.
		echo "lib-mutation-check: $name: the mutated library does not build:" >&2
		cat "$log" >&2
		exit 1
	else
		for t in $tests; do
			area=${t%%/*}
			if ! nice -n 10 make -s -C "$tree/selftests/$area" O="$work/build" \
			     "$work/build/selftests/$t" >>"$log" 2>&1; then
				verdict="caught: $t does not build ($(grep -m1 -o 'error: .*' "$log"))"
				break
			fi
			if ! timeout -k 5 "$per_test_timeout" "$work/build/selftests/$t" >>"$log" 2>&1; then
				verdict="caught by $t: $(grep '^not ok' "$log" | sed 's/^not ok [0-9]* //' | tr '\n' ' ')"
				break
			fi
		done
	fi
	if [[ -n $verdict ]]; then
		caught=$((caught + 1))
		echo "MUTANT $name: $verdict"
	else
		survived+=("$name")
		echo "MUTANT $name: SURVIVED ($tests passed)"
	fi
	cp -p "$top/$file" "$tree/$file"
	touch "$tree/$file"
done
echo "lib-mutation-check: $caught of $total mutants caught"
(( caught == total ))
