// SPDX-License-Identifier: GPL-2.0
/*
 * The barrier task: waits for the trigger gate, meets every rank of the
 * comm at the host barrier, then only the leader increments the
 * barrier-done semaphores; errors end the task with their status.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"

struct two_ranks {
	struct nproxy_loopback_fabric *f;
	struct lb_rank r[2];
	struct nproxy_comm *c[2];
	uint64_t ctx[2];
};

/* rpp 2: both ranks on one worker; rpp 1: one worker each. */
static int two_ranks_setup(struct two_ranks *t, uint32_t rpp)
{
	int i;

	if (nproxy_loopback_fabric_create(2, &t->f))
		return -1;
	for (i = 0; i < 2; i++) {
		struct nproxy_comm_opts o;

		if (lb_rank_setup(&t->r[i], t->f, i, 1 - i, 16))
			return -1;
		o = comm_opts(i, 2, i, rpp, NPROXY_COMM_F_SKIP_NET, t->r[i].lb);
		if (nproxy_comm_open(&o, &t->c[i]))
			return -1;
	}
	return 0;
}

static enum nproxy_status enq_barrier(struct two_ranks *t, int i)
{
	struct nproxy_cc_op op = lb_rank_op(&t->r[i]);

	op.n_barrier_sems = 3;
	op.barrier_sems[0] = 1;
	op.barrier_sems[1] = 4;
	op.barrier_sems[2] = 5;
	return nproxy_enq_proxy_tasks(t->c[i], &op, 1, &t->ctx[i]);
}

static void two_ranks_teardown(struct two_ranks *t)
{
	int i;

	for (i = 0; i < 2; i++) {
		nproxy_comm_close(t->c[i]);
		nproxy_loopback_destroy(t->r[i].lb);
	}
	nproxy_loopback_fabric_destroy(t->f);
}

static bool barrier_done(struct two_ranks *t, int i)
{
	enum nproxy_status st;
	bool done = false;

	return nproxy_check_status(t->c[i], t->ctx[i], NPROXY_TASK_BARRIER, &done, &st) ==
	       NPROXY_SUCCESS && done;
}

/* Both ranks' barriers end in SUCCESS; only the leader's done semaphores moved. */
static void check_both_done(struct __test_metadata *_metadata, struct two_ranks *t)
{
	int i;

	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(t->c[0], t->ctx[0], NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(t->c[1], t->ctx[1], NPROXY_TASK_BARRIER, 10000));
	for (i = 0; i < 8; i++) {
		uint64_t want = (i == 1 || i == 4 || i == 5) ? 1 : 0;

		EXPECT_EQ(want, nproxy_sem_load(&t->r[0].sems[i]));
		EXPECT_EQ(0u, nproxy_sem_load(&t->r[1].sems[i]));	/* not the leader */
	}
}

TEST(leader_increments_the_barrier_done_semaphores_once_all_ranks_arrive)
{
	struct nproxy_loopback_counters lc;
	struct two_ranks t;

	ASSERT_EQ(0, two_ranks_setup(&t, 2));
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 0));
	/* Rank 1 has not arrived: rank 0's barrier keeps testing, no semaphore moves. */
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 200, 10000));
	EXPECT_FALSE(barrier_done(&t, 0));
	nproxy_loopback_counters(t.r[0].lb, &lc);
	EXPECT_EQ(1u, lc.barrier_arrives);
	EXPECT_GT(lc.barrier_tests, 10u);
	EXPECT_EQ(0u, nproxy_sem_load(&t.r[0].sems[1]));

	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 1));
	check_both_done(_metadata, &t);
	two_ranks_teardown(&t);
}

TEST(ranks_on_different_workers_meet_without_blocking_either)
{
	struct two_ranks t;

	ASSERT_EQ(0, two_ranks_setup(&t, 1));
	EXPECT_EQ(2u, nproxy_proxy_group_count());
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 1));
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 0));
	check_both_done(_metadata, &t);
	two_ranks_teardown(&t);
}

TEST(barrier_waits_for_the_trigger_gate_before_arriving)
{
	struct nproxy_loopback_counters lc;
	struct two_ranks t;

	ASSERT_EQ(0, two_ranks_setup(&t, 2));
	t.r[0].trig[0] = NPROXY_PROXY_TRIGGER_SENTINEL;
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 0));
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 1));
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 200, 10000));
	nproxy_loopback_counters(t.r[0].lb, &lc);
	EXPECT_EQ(0u, lc.barrier_arrives);
	EXPECT_FALSE(barrier_done(&t, 0));
	EXPECT_FALSE(barrier_done(&t, 1));	/* rank 1 waits for rank 0 */

	nproxy_trigger_store(t.r[0].words[0], 3);
	check_both_done(_metadata, &t);
	EXPECT_EQ(0u, nproxy_trigger_load(t.r[0].words[0]));	/* consumed */
	two_ranks_teardown(&t);
}

TEST(barrier_error_ends_the_task_with_its_status)
{
	struct two_ranks t;

	ASSERT_EQ(0, two_ranks_setup(&t, 2));
	nproxy_loopback_fail_next_barrier(t.r[0].lb, NPROXY_PEER_DEAD);
	capture_start();
	ASSERT_ST(NPROXY_SUCCESS, enq_barrier(&t, 0));
	EXPECT_ST(NPROXY_PEER_DEAD, nproxy_wait_status(t.c[0], t.ctx[0], NPROXY_TASK_BARRIER,
							 10000));
	EXPECT_EQ(1, capture_count("host barrier arrive", 0));
	capture_stop();
	EXPECT_EQ(0u, nproxy_sem_load(&t.r[0].sems[1]));
	two_ranks_teardown(&t);
}

TEST_HARNESS_MAIN
