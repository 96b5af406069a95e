// SPDX-License-Identifier: GPL-2.0
/*
 * The comm's watchdog timeout, its units and its defaults: 0 in the
 * options means NPROXY_PROXY_TIMEOUT_S, which speaks seconds (as the
 * reference runtime's variable does), else 300 s; the option speaks
 * milliseconds and wins over the variable; a malformed variable fails the
 * open.  Read back from the proxy-state page (timeout_s, rounded up),
 * and once as a wait: nproxy_wait_status(..., 0) on a task that never
 * finishes ends NPROXY_TIMEOUT after the comm's timeout.
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include <nproxy/handshake.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"
#include "proxy_test_util.h"

#define VAR "NPROXY_PROXY_TIMEOUT_S"

FIXTURE(units) {
	struct nproxy_hs *hs;
};

FIXTURE_SETUP(units)
{
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD,
				     .n_streams = 1, .n_sems = 1 };

	unsetenv(VAR);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_hs_open(&ho, &self->hs));
}

FIXTURE_TEARDOWN(units)
{
	unsetenv(VAR);
	nproxy_hs_close(self->hs);
}

/* The timeout a comm opened with timeout_ms publishes; -1 if the open failed. */
static long published_timeout_s(struct nproxy_hs *hs, uint32_t timeout_ms)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	struct nproxy_comm *c;
	long t;

	o.hs = hs;
	o.timeout_ms = timeout_ms;
	if (nproxy_comm_open(&o, &c) != NPROXY_SUCCESS)
		return -1;
	t = nproxy_hs_proxy_state(hs)->timeout_s;
	nproxy_comm_close(c);
	return t;
}

TEST_F(units, zero_and_unset_is_300_s)
{
	EXPECT_EQ(300, published_timeout_s(self->hs, 0));
}

TEST_F(units, variable_speaks_seconds)
{
	setenv(VAR, "7", 1);
	EXPECT_EQ(7, published_timeout_s(self->hs, 0));
}

TEST_F(units, option_speaks_ms_and_wins)
{
	setenv(VAR, "7", 1);
	EXPECT_EQ(5, published_timeout_s(self->hs, 4500));	/* rounded up */
	EXPECT_EQ(1, published_timeout_s(self->hs, 1));
}

TEST_F(units, malformed_variable_fails_the_open)
{
	capture_start();
	setenv(VAR, "7s", 1);
	EXPECT_EQ(-1, published_timeout_s(self->hs, 0));
	setenv(VAR, "0", 1);
	EXPECT_EQ(-1, published_timeout_s(self->hs, 0));
	capture_stop();
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(NULL), VAR));
}

/* A 1 s watchdog from the variable ends a wait of "0: the comm's timeout" after about 1 s. */
TEST_F(units, wait_of_zero_uses_the_comm_timeout)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, 0, NULL);
	static struct nproxy_fifo_set fifos;
	static uint32_t trigger;
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;
	struct nproxy_comm *c;
	uint64_t ctx = 0, t0, ms;

	setenv(VAR, "1", 1);
	o.seam.ops = &nproxy_test_idle_seam_ops;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	op.streams_n = 1;
	op.streams[0].blocks = &fifos;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = (volatile uint32_t *)&trigger;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 0, &ctx));
	t0 = nproxy_test_now_ms();
	capture_start();
	EXPECT_ST(NPROXY_TIMEOUT, nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 0));
	capture_stop();
	ms = nproxy_test_now_ms() - t0;
	EXPECT_LE(900u, ms);
	EXPECT_GT(20000u, ms);	/* seconds, not a thousand of them */
	nproxy_comm_close(c);
}

TEST_HARNESS_MAIN
