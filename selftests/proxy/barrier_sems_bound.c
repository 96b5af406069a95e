// SPDX-License-Identifier: GPL-2.0
/*
 * The barrier semaphores of an op are indices into its device semaphores:
 * an index at or past n_sems is refused at enqueue (NPROXY_INVALID, nothing
 * queued), the last valid index is accepted, with the op's own semaphores
 * or, when it names none, the comm's handshake region's.
 */
#include "kselftest_harness.h"
#include <nproxy/handshake.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"
#include "proxy_test_util.h"

static struct nproxy_fifo_set fifos;
static uint32_t trigger;

static struct nproxy_cc_op barrier_op(uint64_t *sems, uint32_t n_sems, uint32_t index)
{
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;

	op.streams_n = 1;
	op.streams[0].blocks = &fifos;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = (volatile uint32_t *)&trigger;
	op.dev.sems = sems;
	op.dev.n_sems = n_sems;
	op.n_barrier_sems = 1;
	op.barrier_sems[0] = index;
	return op;
}

FIXTURE(bsem) {
	struct nproxy_comm *c;
	struct nproxy_hs *hs;
};

FIXTURE_SETUP(bsem)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD,
				     .n_streams = 1, .n_sems = 3 };

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_open(&ho, &self->hs));
	o.hs = self->hs;
	o.seam.ops = &nproxy_test_idle_seam_ops;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &self->c));
}

FIXTURE_TEARDOWN(bsem)
{
	nproxy_comm_close(self->c);
	nproxy_hs_close(self->hs);
}

TEST_F(bsem, index_past_the_ops_sems_refused)
{
	uint64_t sems[2] = { 0, 0 };
	struct nproxy_cc_op op = barrier_op(sems, 2, 2);
	struct nproxy_proxy_stats st;

	capture_start();
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(self->c, &op, 1, NULL));
	capture_stop();
	ASSERT_ST(NPROXY_SUCCESS, nproxy_proxy_group_stats(nproxy_comm_gid(self->c), &st));
	EXPECT_EQ(0u, st.tasks_active);
}

TEST_F(bsem, last_index_of_the_ops_sems_accepted)
{
	uint64_t sems[2] = { 0, 0 };
	struct nproxy_cc_op op = barrier_op(sems, 2, 1);
	uint64_t ctx = 0;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(self->c, &op, 1, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(self->c, ctx, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(self->c, ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_EQ(1u, sems[1]);	/* the one-rank barrier's leader incremented it */
}

/* No sems in the op: the region's three; index 3 is past them. */
TEST_F(bsem, region_sems_bound_the_index)
{
	struct nproxy_cc_op op = barrier_op(NULL, 0, 3);
	uint64_t ctx = 0;

	capture_start();
	EXPECT_ST(NPROXY_INVALID, nproxy_enq_proxy_tasks(self->c, &op, 1, NULL));
	capture_stop();
	op.barrier_sems[0] = 2;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(self->c, &op, 1, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(self->c, ctx, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(self->c, ctx, NPROXY_TASK_NETWORK, 10000));
}

TEST_HARNESS_MAIN
