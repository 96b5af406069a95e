// SPDX-License-Identifier: GPL-2.0
/*
 * An explicit ctx (libnrt's enc_ctx) is unique per comm, not per worker:
 * the same ctx on two comms of one group is two ops, each found, waited
 * for and consumed on its own comm; on one comm, a ctx still unconsumed is
 * refused (NPROXY_BUSY) and usable again once consumed.  Network tasks
 * skip the network (NPROXY_COMM_F_SKIP_NET): INIT -> DONE.
 */
#include "kselftest_harness.h"
#include <nproxy/proxy.h>
#include "nproxy_test.h"
#include "proxy_test_util.h"

#define CTX 7

static struct nproxy_fifo_set fifos;
static uint32_t trigger;

static enum nproxy_status enq(struct nproxy_comm *c, uint64_t ctx, uint64_t *ctx_out)
{
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;

	op.ctx = ctx;
	op.streams_n = 1;
	op.streams[0].blocks = &fifos;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = (volatile uint32_t *)&trigger;
	return nproxy_enq_proxy_tasks(c, &op, 1, ctx_out);
}

static enum nproxy_status wait_both(struct nproxy_comm *c, uint64_t ctx)
{
	enum nproxy_status st = nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 10000);

	return st ? st : nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 10000);
}

FIXTURE(ctx) {
	struct nproxy_comm *c[2];
};

FIXTURE_SETUP(ctx)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);

	o.seam.ops = &nproxy_test_idle_seam_ops;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &self->c[0]));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &self->c[1]));
	ASSERT_EQ(nproxy_comm_gid(self->c[0]), nproxy_comm_gid(self->c[1]));
}

FIXTURE_TEARDOWN(ctx)
{
	nproxy_comm_close(self->c[0]);
	nproxy_comm_close(self->c[1]);
}

TEST_F(ctx, same_ctx_on_two_comms_is_two_ops)
{
	uint64_t out[2] = { 0, 0 };
	enum nproxy_status status;
	bool done;

	ASSERT_ST(NPROXY_SUCCESS, enq(self->c[0], CTX, &out[0]));
	ASSERT_ST(NPROXY_SUCCESS, enq(self->c[1], CTX, &out[1]));
	EXPECT_EQ((uint64_t)CTX, out[0]);
	EXPECT_EQ((uint64_t)CTX, out[1]);
	/* Consuming comm 0's op leaves comm 1's in place. */
	ASSERT_ST(NPROXY_SUCCESS, wait_both(self->c[0], CTX));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(self->c[0], CTX, NPROXY_TASK_NETWORK,
							&done, &status));
	/* (A check would consume a DONE status: the wait is the proof.) */
	ASSERT_ST(NPROXY_SUCCESS, wait_both(self->c[1], CTX));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(self->c[1], CTX, NPROXY_TASK_NETWORK,
							&done, &status));
}

TEST_F(ctx, unconsumed_ctx_on_one_comm_is_busy_until_consumed)
{
	capture_start();
	ASSERT_ST(NPROXY_SUCCESS, enq(self->c[0], CTX, NULL));
	EXPECT_ST(NPROXY_BUSY, enq(self->c[0], CTX, NULL));
	capture_stop();
	ASSERT_ST(NPROXY_SUCCESS, wait_both(self->c[0], CTX));
	EXPECT_ST(NPROXY_SUCCESS, enq(self->c[0], CTX, NULL));
	EXPECT_ST(NPROXY_SUCCESS, wait_both(self->c[0], CTX));
}

/* Library-assigned ctx values have the top bit set: never an explicit small one. */
TEST_F(ctx, assigned_ctx_has_the_top_bit)
{
	uint64_t a = 0, b = 0;

	ASSERT_ST(NPROXY_SUCCESS, enq(self->c[0], 0, &a));
	ASSERT_ST(NPROXY_SUCCESS, enq(self->c[0], 0, &b));
	EXPECT_TRUE((a >> 63) != 0);
	EXPECT_TRUE((b >> 63) != 0);
	EXPECT_NE(a, b);
	EXPECT_ST(NPROXY_SUCCESS, wait_both(self->c[0], a));
	EXPECT_ST(NPROXY_SUCCESS, wait_both(self->c[0], b));
}

TEST_HARNESS_MAIN
