// SPDX-License-Identifier: GPL-2.0
/*
 * Stress: several threads join and leave shared-proxy groups while tasks
 * run (and some comms leave with tasks still in flight).  Checks: worker
 * thread count == live groups, refcounts == comms held, no task lost, no
 * task stepped after DONE, no seam call on a stopped block, nothing left.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"

#define N_THREADS	4
#define N_ITERS		24
#define OPS_PER_ITER	4

static pthread_barrier_t midway, checked;
static int failures;		/* atomic */

#define fail() fail_at(__LINE__)
static void fail_at(int line)
{
	if (__atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED) < 5)
		fprintf(stderr, "# failure at line %d\n", line);
}

static void one_comm(int th, int it, bool hold_at_midway)
{
	struct nproxy_loopback_fabric *f;
	struct nproxy_loopback_counters lc;
	struct nproxy_comm_opts o;
	struct nproxy_comm *c;
	struct lb_rank r;
	uint64_t ctx[OPS_PER_ITER];
	int i;

	if (nproxy_loopback_fabric_create(1, &f) || lb_rank_setup(&r, f, 0, 0, 64)) {
		fail();
		return;
	}
	/* Devices 0..3 with 2 ranks per proxy: groups 0 and 1. */
	o = comm_opts(0, 1, (uint32_t)(th + it) % 4, 2, 0, r.lb);
	o.idle_policy = (enum nproxy_idle_policy)(1 + (th + it) % 4);
	if (nproxy_comm_open(&o, &c)) {
		fail();
		goto out_lb;
	}
	for (i = 0; i < OPS_PER_ITER; i++) {
		struct nproxy_cc_op op = lb_rank_op(&r);

		if (nproxy_enq_proxy_tasks(c, &op, (uint64_t)i, &ctx[i]))
			fail();
	}
	if (hold_at_midway) {
		pthread_barrier_wait(&midway);	/* main checks the registry ... */
		pthread_barrier_wait(&checked);	/* ... until here */
	}
	if (it % 3 == 2) {
		/* Leave with tasks in flight: the engine stalls, free aborts them. */
		struct nproxy_cc_op op = lb_rank_op(&r);

		nproxy_loopback_stall(r.lb, 1u << 30);
		if (nproxy_enq_proxy_tasks(c, &op, 99, NULL))
			fail();
	} else {
		for (i = 0; i < OPS_PER_ITER; i++) {
			if (nproxy_wait_status(c, ctx[i], NPROXY_TASK_NETWORK, 20000) ||
			    nproxy_wait_status(c, ctx[i], NPROXY_TASK_BARRIER, 20000))
				fail();		/* a lost or failed task */
		}
		if (!lb_rank_got(&r, 0, 64) || nproxy_sem_load(&r.sems[0]) != OPS_PER_ITER)
			fail();
	}
	nproxy_comm_close(c);
	nproxy_loopback_counters(r.lb, &lc);
	if (lc.blocks_live || lc.misuse || lc.starts != lc.stops)
		fail();
out_lb:
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
}

static void *churn(void *arg)
{
	int th = (int)(intptr_t)arg, it;

	for (it = 0; it < N_ITERS; it++)
		one_comm(th, it, it == N_ITERS / 2);
	return NULL;
}

TEST(comms_join_and_leave_groups_while_tasks_run)
{
	pthread_t th[N_THREADS];
	int i, misnamed = -1, n_threads;
	uint32_t groups, refs;

	capture_start();
	ASSERT_EQ(0, pthread_barrier_init(&midway, NULL, N_THREADS + 1));
	ASSERT_EQ(0, pthread_barrier_init(&checked, NULL, N_THREADS + 1));
	for (i = 0; i < N_THREADS; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i));

	/* Midway every thread holds exactly one comm. */
	pthread_barrier_wait(&midway);
	groups = nproxy_proxy_group_count();
	refs = nproxy_proxy_group_refcnt(0) + nproxy_proxy_group_refcnt(1);
	EXPECT_EQ((uint32_t)N_THREADS, refs);
	EXPECT_GE(groups, 1u);
	EXPECT_LE(groups, 2u);
	/* A worker joined just before may linger in /proc for a moment. */
	EXPECT_TRUE(WAIT_UNTIL((n_threads = count_proxy_threads(&misnamed)) == (int)groups, 5000));
	EXPECT_EQ(0, misnamed);
	pthread_barrier_wait(&checked);

	for (i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ(0, __atomic_load_n(&failures, __ATOMIC_RELAXED));
	EXPECT_EQ(0u, nproxy_proxy_group_count());
	EXPECT_TRUE(WAIT_UNTIL(count_proxy_threads(NULL) == 0, 5000));
	EXPECT_EQ(0, capture_count("Task shouldn't be polled after it reached a done state", 1));
	capture_stop();
	pthread_barrier_destroy(&midway);
	pthread_barrier_destroy(&checked);
}

TEST_HARNESS_MAIN
