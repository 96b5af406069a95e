// SPDX-License-Identifier: GPL-2.0
/*
 * proxy_state_cost: what publishing the proxy state for tools costs the
 * proxy (lib/proxy/proxy_internal.h), per hook, in a tight loop on one
 * thread: a run_state change (seqlock'd stores + CLOCK_MONOTONIC_COARSE),
 * a repeated run_state (one compare), a basic-block switch, and a task
 * slot claim (npx_proxy_state_task_claim's work: an atomic add, the slot's
 * stores, the clock).  Baseline in the same run: the relaxed store of
 * run_state that proxy_status_set_state does anyway.  An op of nproxy-run
 * takes two claims and about eight state changes: multiply, and compare
 * with the op's latency in `bench/run coll`.
 *
 * Usage: proxy_state_cost [ITERATIONS]  (default 20000000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "proxy/proxy_internal.h"
#include "nproxy_test.h"

static double now_s(void)
{
	return (double)nproxy_test_now_ns() / 1e9;
}

/* The claim's work without a comm: the same stores as npx_proxy_state_task_claim. */
static void claim(struct nproxy_proxy_state *ps, uint64_t i)
{
	uint64_t n = __atomic_fetch_add(&ps->next_slot, 1, __ATOMIC_RELAXED);
	struct nproxy_proxy_task *slot = &ps->tasks[n % NPROXY_PROXY_STATE_TASKS];

	proxy_state_task_fill(slot, 1, i, i, 1);
	__atomic_store_n(&ps->ops_enqueued, ps->ops_enqueued + 1, __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
	static struct nproxy_proxy_state ps;
	struct nproxy_proxy_task *slot = &ps.tasks[0];
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	uint32_t word = 0;
	double t0, base, change, same, bb, cl;

	if (n <= 0) {
		fprintf(stderr, "usage: proxy_state_cost [ITERATIONS]\n");
		return 2;
	}
	t0 = now_s();
	for (long i = 0; i < n; i++)
		__atomic_store_n(&word, (uint32_t)(i & 1) + 1, __ATOMIC_RELEASE);
	base = now_s() - t0;
	t0 = now_s();
	for (long i = 0; i < n; i++)
		proxy_state_task_state(slot, (uint32_t)(i & 1) + 1, 0);
	change = now_s() - t0;
	t0 = now_s();
	for (long i = 0; i < n; i++)
		proxy_state_task_state(slot, 1, 0);
	same = now_s() - t0;
	t0 = now_s();
	for (long i = 0; i < n; i++)
		proxy_state_task_bb(slot, (uint32_t)i);
	bb = now_s() - t0;
	t0 = now_s();
	for (long i = 0; i < n; i++)
		claim(&ps, (uint64_t)i);
	cl = now_s() - t0;

	printf("%-34s %8s %8s\n", "hook", "ns/call", "x base");
	printf("%-34s %8.2f %8s\n", "baseline: run_state store", base / n * 1e9, "1.00");
	printf("%-34s %8.2f %8.1f\n", "run_state change (published)", change / n * 1e9, change / base);
	printf("%-34s %8.2f %8.1f\n", "run_state repeated (compare)", same / n * 1e9, same / base);
	printf("%-34s %8.2f %8.1f\n", "basic-block switch", bb / n * 1e9, bb / base);
	printf("%-34s %8.2f %8.1f\n", "task slot claim", cl / n * 1e9, cl / base);
	printf("# per op (2 claims + ~8 changes): ~%.0f ns\n", (2 * cl + 8 * change) / n * 1e9);
	return word == 3;	/* keeps the baseline loop; never 3 */
}
