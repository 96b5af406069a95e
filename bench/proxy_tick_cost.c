// SPDX-License-Identifier: GPL-2.0
/*
 * proxy_tick_cost: what one pass of the worker loop costs with 1, 16 and
 * 256 idle network tasks (each IDLE every tick: the seam's progress()
 * reports nothing moved), measured as the worker thread's own CPU time
 * divided by the steps (and ticks) it ran, busy-spin policy so nothing but
 * the loop runs.  Baseline in the same run: the same number of indirect
 * calls to the same progress() function from a plain loop.
 *
 * Usage: proxy_tick_cost [SECONDS_PER_POINT]  (default 1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

/* The baseline: just the seam calls, no loop machinery. */
static double bare_calls_ns(uint64_t n)
{
	const struct nproxy_seam_ops *volatile ops = &nproxy_test_idle_seam_ops;
	bool idle, bd, done;
	uint64_t t0 = nproxy_test_thread_cpu_ns(gettid()), i;

	for (i = 0; i < n; i++)
		ops->progress(NULL, 0, 0, &idle, &bd, &done);
	return (double)(nproxy_test_thread_cpu_ns(gettid()) - t0) / (double)n;
}

int main(int argc, char **argv)
{
	unsigned int secs = argc > 1 ? (unsigned int)atoi(argv[1]) : 1;
	static const unsigned int counts[] = { 1, 16, 256 };
	size_t k;

	if (!secs)
		secs = 1;
	printf("# worker CPU time per step / per tick, busy-spin, %u s per point\n", secs);
	printf("| idle tasks | ns/task-step | ns/tick | bare progress() call ns | step/bare |\n");
	printf("|------------|--------------|---------|-------------------------|-----------|\n");
	for (k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		unsigned int n = counts[k], i;
		struct nproxy_comm **comms = calloc(n, sizeof(*comms));
		struct nproxy_proxy_stats a, b;
		uint64_t c0, c1;
		double per_step, bare;
		int tid;

		for (i = 0; i < n; i++)
			if (nproxy_test_idle_task_open(NPROXY_IDLE_SPIN, &comms[i]))
				return 1;
		/* Let the barrier tasks finish: n network tasks stay, all IDLE. */
		if (nproxy_test_idle_tasks_settle(n, 120000, &a)) {
			fprintf(stderr, "proxy_tick_cost: worker has %u tasks, not %u\n",
				(unsigned int)a.tasks_active, n);
			return 1;
		}
		tid = a.worker_tid;
		c0 = nproxy_test_thread_cpu_ns(tid);
		sleep(secs);
		nproxy_proxy_group_stats(0, &b);
		c1 = nproxy_test_thread_cpu_ns(tid);
		per_step = (double)(c1 - c0) / (double)(b.steps - a.steps);
		bare = bare_calls_ns(b.steps - a.steps > 50000000 ? 50000000 : b.steps - a.steps);
		printf("| %10u | %12.1f | %7.0f | %23.1f | %8.1fx |\n", n, per_step,
		       (double)(c1 - c0) / (double)(b.ticks - a.ticks), bare, per_step / bare);
		for (i = 0; i < n; i++)
			nproxy_comm_close(comms[i]);
		free(comms);
	}
	return 0;
}
