// SPDX-License-Identifier: GPL-2.0
/*
 * The network task's state machine over the seam: start every block in
 * INIT, progress the current block, stop a drained block before moving to
 * the next, skip policy, start / progress failures, preconditions.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"

/* A recording wrapper around the loopback seam: the exact call sequence. */
#define MAX_CALLS 4096
struct call {
	char kind;	/* 'S'tart, 'P'rogress, 'T' stop */
	uint32_t stream, bb;
};
static struct call calls[MAX_CALLS];
static int n_calls;	/* written only by the worker; read after the task is done */
static struct nproxy_seam inner;

static void rec(char kind, uint32_t s, uint32_t bb)
{
	if (n_calls < MAX_CALLS)
		calls[n_calls++] = (struct call){ kind, s, bb };
}

static enum nproxy_status rec_start(void *e, uint32_t s, uint32_t bb,
				    const struct nproxy_fifo_set *f,
				    const struct nproxy_device_sems *d)
{
	rec('S', s, bb);
	return inner.ops->start(inner.engine, s, bb, f, d);
}

static enum nproxy_status rec_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
				       bool *block_done, bool *done)
{
	rec('P', s, bb);
	return inner.ops->progress(inner.engine, s, bb, idle, block_done, done);
}

/* Not NPROXY_SUCCESS: what the seam's stop() of fail_stop_bb reports. */
static enum nproxy_status fail_stop_status;
static uint32_t fail_stop_bb;

static enum nproxy_status rec_stop(void *e, uint32_t s, uint32_t bb)
{
	enum nproxy_status rc;

	rec('T', s, bb);
	rc = inner.ops->stop(inner.engine, s, bb);
	if (rc == NPROXY_SUCCESS && fail_stop_status != NPROXY_SUCCESS && bb == fail_stop_bb)
		rc = fail_stop_status;
	return rc;
}

static const struct nproxy_seam_ops rec_ops = {
	.name = "record", .start = rec_start, .progress = rec_progress, .stop = rec_stop,
};

static int setup(struct lb_comm *s, uint32_t flags, bool record)
{
	struct nproxy_comm_opts o;

	if (lb_comm_prepare(s, 0, flags, &o))
		return -1;
	if (record) {
		inner = o.seam;
		n_calls = 0;
		o.seam.ops = &rec_ops;
	}
	return nproxy_comm_open(&o, &s->c) ? -1 : 0;
}

/* Enqueue op as one task, expect its network part to end with want; the seam's counters after. */
static void run_task(struct __test_metadata *_metadata, struct lb_comm *s,
		     struct nproxy_cc_op *op, enum nproxy_status want,
		     struct nproxy_loopback_counters *lc)
{
	uint64_t ctx;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(s->c, op, 1, &ctx));
	ASSERT_ST(want, nproxy_wait_status(s->c, ctx, NPROXY_TASK_NETWORK, 10000));
	nproxy_loopback_counters(s->r.lb, lc);
}

TEST(every_block_is_started_then_stopped_in_order_once_drained)
{
	struct nproxy_fifo_set blocks0[3], blocks1[2];
	struct nproxy_loopback_counters lc;
	struct lb_comm s;
	struct nproxy_cc_op op;
	uint32_t next_bb[2] = { 0, 0 }, stopped[2] = { 0, 0 };
	int i, started = 0;

	ASSERT_EQ(0, setup(&s, 0, true));
	for (i = 0; i < 3; i++)
		blocks0[i] = s.r.fs;
	for (i = 0; i < 2; i++)
		blocks1[i] = s.r.fs;
	op = lb_rank_op(&s.r);
	op.streams_n = 2;
	op.trigger_words[1] = s.r.words[1];
	op.streams[0].blocks = blocks0;
	op.streams[0].n_blocks = 3;
	op.streams[1].blocks = blocks1;
	op.streams[1].n_blocks = 2;
	run_task(_metadata, &s, &op, NPROXY_SUCCESS, &lc);
	EXPECT_EQ(5u, lc.starts);
	EXPECT_EQ(5u, lc.stops);
	EXPECT_EQ(0u, lc.blocks_live);
	EXPECT_EQ(0u, lc.misuse);
	EXPECT_EQ(10u, lc.ops_completed);
	EXPECT_EQ(5u, nproxy_sem_load(&s.r.sems[0]));
	/* INIT starts all five blocks before any progress. */
	for (i = 0; i < n_calls && calls[i].kind == 'S'; i++)
		started++;
	EXPECT_EQ(5, started);
	/* Then per stream: progress only the current block; stop it once drained,
	 * exactly once, before the next block is progressed. */
	for (; i < n_calls; i++) {
		struct call *k = &calls[i];

		ASSERT_LT(k->stream, 2u);
		ASSERT_NE('S', k->kind);
		if (k->kind == 'P') {
			EXPECT_EQ(next_bb[k->stream], k->bb);
		} else {
			EXPECT_EQ(next_bb[k->stream], k->bb);
			next_bb[k->stream]++;
			stopped[k->stream]++;
		}
	}
	EXPECT_EQ(3u, stopped[0]);
	EXPECT_EQ(2u, stopped[1]);
	lb_comm_close(&s);
}

TEST(skip_policy_completes_without_touching_the_seam)
{
	struct nproxy_loopback_counters lc;
	struct lb_comm s;
	struct nproxy_cc_op op;

	ASSERT_EQ(0, setup(&s, NPROXY_COMM_F_SKIP_NET, false));
	op = lb_rank_op(&s.r);
	run_task(_metadata, &s, &op, NPROXY_SUCCESS, &lc);
	EXPECT_EQ(0u, lc.starts);
	EXPECT_EQ(0u, lc.progresses);
	EXPECT_EQ(0u, lc.stops);
	lb_comm_close(&s);
}

TEST(start_failure_ends_the_task_and_stops_the_started_blocks)
{
	struct nproxy_loopback_counters lc;
	struct nproxy_net_op bad_ops[1];
	struct nproxy_fifo_set blocks[2];
	struct lb_comm s;
	struct nproxy_cc_op op;

	ASSERT_EQ(0, setup(&s, 0, false));
	blocks[0] = s.r.fs;
	blocks[1] = s.r.fs;
	bad_ops[0] = s.r.ops[0];
	bad_ops[0].peer = 9;		/* no such rank: the engine refuses the block */
	blocks[1].ops = bad_ops;
	blocks[1].n_ops = 1;
	op = lb_rank_op(&s.r);
	op.streams[0].blocks = blocks;
	op.streams[0].n_blocks = 2;
	capture_start();
	run_task(_metadata, &s, &op, NPROXY_INVALID, &lc);
	EXPECT_EQ(1, capture_count("[nec_dev 0] failed to start network proxy ret:2", 0));
	capture_stop();
	EXPECT_EQ(2u, lc.starts);
	EXPECT_EQ(1u, lc.stops);		/* block 0 was started, so it is stopped */
	EXPECT_EQ(0u, lc.blocks_live);
	EXPECT_EQ(0u, lc.progresses);
	lb_comm_close(&s);
}

TEST(progress_error_ends_the_task_with_that_status)
{
	struct nproxy_loopback_counters lc;
	struct lb_comm s;
	struct nproxy_cc_op op;

	ASSERT_EQ(0, setup(&s, 0, false));
	nproxy_loopback_stall(s.r.lb, 5);			/* IDLE first ... */
	nproxy_loopback_fail_next_progress(s.r.lb, NPROXY_PEER_DEAD);	/* ... then fail */
	op = lb_rank_op(&s.r);
	capture_start();
	run_task(_metadata, &s, &op, NPROXY_PEER_DEAD, &lc);
	capture_stop();
	EXPECT_EQ(0u, lc.blocks_live);
	EXPECT_EQ(0u, lc.ops_completed);
	EXPECT_EQ(0u, lc.misuse);
	lb_comm_close(&s);
}

/* The seam's stop() can fail too: the task ends with that error, never SUCCESS. */
TEST(stop_error_ends_the_task_with_that_status)
{
	struct nproxy_loopback_counters lc;
	struct nproxy_fifo_set blocks[2];
	struct lb_comm s;
	struct nproxy_cc_op op;
	int i, progressed_after = 0;

	ASSERT_EQ(0, setup(&s, 0, true));
	blocks[0] = s.r.fs;
	blocks[1] = s.r.fs;
	op = lb_rank_op(&s.r);
	op.streams[0].blocks = blocks;
	op.streams[0].n_blocks = 2;
	fail_stop_status = NPROXY_NET_ERROR;
	fail_stop_bb = 0;
	capture_start();
	run_task(_metadata, &s, &op, NPROXY_NET_ERROR, &lc);
	EXPECT_EQ(1, capture_count("network proxy stop returns", 0));
	capture_stop();
	/* Block 1 is never progressed once block 0's stop failed. */
	for (i = 0; i < n_calls; i++)
		if (calls[i].kind == 'P' && calls[i].bb == 1)
			progressed_after++;
	EXPECT_EQ(0, progressed_after);
	EXPECT_EQ(0u, lc.blocks_live);
	fail_stop_status = NPROXY_SUCCESS;
	lb_comm_close(&s);
}

TEST(precondition_holds_the_block_until_the_device_semaphore)
{
	struct lb_comm s;
	struct nproxy_cc_op op;
	enum nproxy_status st;
	bool done;
	uint64_t ctx;

	ASSERT_EQ(0, setup(&s, 0, false));
	s.r.ops[0].flags = NPROXY_NET_OP_F_PRECOND;	/* send once sem[3] >= 2 */
	s.r.ops[0].pre_sem = 3;
	s.r.ops[0].pre_value = 2;
	op = lb_rank_op(&s.r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(s.c, &op, 1, &ctx));
	nproxy_sem_add(&s.r.sems[3], 1);
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 200, 10000));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_check_status(s.c, ctx, NPROXY_TASK_NETWORK, &done, &st));
	EXPECT_FALSE(done);
	EXPECT_EQ(0u, nproxy_sem_load(&s.r.sems[0]));
	nproxy_sem_add(&s.r.sems[3], 1);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(s.c, ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_EQ(1u, nproxy_sem_load(&s.r.sems[0]));
	EXPECT_TRUE(lb_rank_got(&s.r, 0, 32));
	lb_comm_close(&s);
}

TEST(invalid_ops_are_refused_at_enqueue)
{
	struct lb_comm s;
	struct nproxy_cc_op op;

	ASSERT_EQ(0, setup(&s, 0, false));
	capture_start();
	op = lb_rank_op(&s.r);
	op.streams_n = 0;
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(s.c, &op, 1, NULL));
	op = lb_rank_op(&s.r);
	op.streams_n = 5;
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(s.c, &op, 1, NULL));
	op = lb_rank_op(&s.r);
	op.trigger_words[0] = NULL;		/* no words and no handshake region */
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(s.c, &op, 1, NULL));
	op = lb_rank_op(&s.r);
	op.n_barrier_sems = 1;
	op.barrier_sems[0] = 8;			/* past dev.n_sems */
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(s.c, &op, 1, NULL));
	op = lb_rank_op(&s.r);
	op.size = 16;
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(s.c, &op, 1, NULL));
	capture_stop();
	EXPECT_EQ(0u, group_stats(0).tasks_active);
	lb_comm_close(&s);
}

TEST_HARNESS_MAIN
