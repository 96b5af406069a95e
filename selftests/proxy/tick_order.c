// SPDX-License-Identifier: GPL-2.0
/*
 * What one tick of the group does, told by the group's tick counter (the
 * ticks finished so far, nproxy_proxy_group_stats().ticks) read from
 * inside the seam's and the barrier's calls:
 *
 *  1. A network task whose trigger is written before its first step
 *     starts its block and posts in that same step: no tick per state.
 *  2. Network tasks are stepped before barrier tasks.  A barrier carried on
 *     the next op's data (its test answers NPROXY_BUSY until that op's
 *     receive is in, as lib/rank's does) is done in the tick where that
 *     op's network task finishes, and the op's own barrier, held behind
 *     it, arrives and is tested in that tick too.  In enqueue order the
 *     earlier barrier is stepped before the network task and sees the
 *     receive one tick late.
 *
 * The worker alone steps the group (NPROXY_CALLER_DRIVES=never).
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include "proxy_test_util.h"
#include "proxy/proxy_internal.h"

#define UNSEEN	UINT64_MAX

/* The ticks finished when each event was first seen. */
static struct {
	struct nproxy_seam inner;
	struct nproxy_host_barrier inner_barrier;
	volatile uint64_t *recv_sem;	/* the recv completions' semaphore */
	uint64_t started, progressed, net_done[2];
	uint64_t bar1_done, bar2_tested;
	uint32_t net_ops;		/* network tasks finished */
	struct nproxy_comm *comm;
} ev;

/*
 * Read inside a seam or barrier call, by the thread that ticks (the only
 * writer): not through nproxy_proxy_group_stats(), whose registry lock
 * comes before the group's, which the caller holds.
 */
static uint64_t ticks_now(void)
{
	return __atomic_load_n(&ev.comm->queue->stat_ticks, __ATOMIC_RELAXED);
}

static enum nproxy_status rec_start(void *engine, uint32_t stream, uint32_t bb,
				    const struct nproxy_fifo_set *fifos,
				    const struct nproxy_device_sems *dev)
{
	if (ev.started == UNSEEN)
		ev.started = ticks_now();
	return ev.inner.ops->start(ev.inner.engine, stream, bb, fifos, dev);
}

static enum nproxy_status rec_progress(void *engine, uint32_t stream, uint32_t bb, bool *idle,
				       bool *block_done, bool *done)
{
	enum nproxy_status st;

	if (ev.progressed == UNSEEN)
		ev.progressed = ticks_now();
	st = ev.inner.ops->progress(ev.inner.engine, stream, bb, idle, block_done, done);
	if (st == NPROXY_SUCCESS && *done && ev.net_ops < 2)
		ev.net_done[ev.net_ops++] = ticks_now();
	return st;
}

static enum nproxy_status rec_stop(void *engine, uint32_t stream, uint32_t bb)
{
	return ev.inner.ops->stop(ev.inner.engine, stream, bb);
}

static const struct nproxy_seam_ops rec_seam_ops = {
	.name = "recording", .start = rec_start, .progress = rec_progress, .stop = rec_stop,
};

static enum nproxy_status carried_arrive(void *ctx, uint64_t seq)
{
	return NPROXY_SUCCESS;
}

/*
 * Barrier 1 is carried on op 2's data: done once op 2's receive is in (the
 * semaphore at 2).  Barrier 2 waits for an op that never comes.
 */
static enum nproxy_status carried_test(void *ctx, uint64_t seq, bool *done)
{
	*done = seq == 1 && nproxy_sem_load(ev.recv_sem) >= 2;
	if (*done && ev.bar1_done == UNSEEN)
		ev.bar1_done = ticks_now();
	if (seq == 2 && __atomic_load_n(&ev.bar2_tested, __ATOMIC_RELAXED) == UNSEEN)
		__atomic_store_n(&ev.bar2_tested, ticks_now(), __ATOMIC_RELEASE);
	return *done ? NPROXY_SUCCESS : NPROXY_BUSY;
}

static const struct nproxy_host_barrier_ops carried_ops = {
	.name = "carried", .arrive = carried_arrive, .test = carried_test,
};

/* A one-rank loopback comm of n_ranks ranks behind the recording seam. */
static int open_recorded(struct lb_comm *k, uint32_t n_ranks, struct nproxy_comm **c)
{
	struct nproxy_comm_opts o;
	int rc;

	memset(&ev, 0, sizeof(ev));
	ev.started = ev.progressed = ev.bar1_done = ev.bar2_tested = UNSEEN;
	if (lb_comm_prepare(k, 0, NPROXY_COMM_F_DEVICE_WAIT, &o))
		return -1;
	ev.inner = o.seam;
	ev.recv_sem = &k->r.sems[0];
	o.seam = (struct nproxy_seam){ .ops = &rec_seam_ops };
	o.n_ranks = n_ranks;
	if (n_ranks > 1)
		o.barrier = (struct nproxy_host_barrier){ .ops = &carried_ops };
	setenv("NPROXY_CALLER_DRIVES", "never", 1);
	rc = nproxy_comm_open(&o, c);
	unsetenv("NPROXY_CALLER_DRIVES");
	ev.comm = *c;	/* read by the seam's calls, which an enqueue starts */
	return rc ? -1 : 0;
}

TEST(a_gate_found_open_posts_in_the_tick_that_started_the_block)
{
	struct lb_comm k;
	struct nproxy_cc_op op;

	ASSERT_EQ(0, open_recorded(&k, 1, &k.c));
	op = lb_rank_op(&k.r);		/* its trigger word reads 0: written */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &k.ctx));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_NETWORK, 10000));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	ASSERT_NE(UNSEEN, ev.started);
	ASSERT_NE(UNSEEN, ev.progressed);
	EXPECT_EQ(ev.started, ev.progressed);
	EXPECT_TRUE(lb_rank_got(&k.r, 0, 32));
	lb_comm_close(&k);
}

TEST(a_barrier_carried_on_the_next_ops_data_ends_in_that_ops_last_tick)
{
	struct lb_comm k;
	struct nproxy_cc_op op;
	uint64_t ctx2;

	ASSERT_EQ(0, open_recorded(&k, 2, &k.c));
	op = lb_rank_op(&k.r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &k.ctx));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_EQ(1u, nproxy_sem_load(&k.r.sems[0]));
	/* Barrier 1 now waits for op 2's receive. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &ctx2));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx2, NPROXY_TASK_NETWORK, 10000));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	ASSERT_EQ(2u, ev.net_ops);
	ASSERT_NE(UNSEEN, ev.bar1_done);
	/* Barrier 2 comes after barrier 1's DONE, which the wait may see first. */
	ASSERT_TRUE(WAIT_UNTIL(__atomic_load_n(&ev.bar2_tested, __ATOMIC_ACQUIRE) != UNSEEN, 10000));
	EXPECT_EQ(ev.net_done[1], ev.bar1_done);
	EXPECT_EQ(ev.net_done[1], ev.bar2_tested);
	lb_comm_close(&k);
}

TEST_HARNESS_MAIN
