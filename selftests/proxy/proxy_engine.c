// SPDX-License-Identifier: GPL-2.0
/*
 * The proxy on the real libfabric engine (one rank, shm, sending to
 * itself), with the userspace emulated device: the engine's completion
 * increment is what releases the device program's WAIT_SEM, and a
 * provider that refuses every post (-FI_EAGAIN, by NPROXY_FAULT's
 * post_eagain) ends the task at the engine's deadline instead of hanging.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include <nproxy/fault.h>
#include <nproxy/net.h>

#define ENGINE_TIMEOUT_MS 1000
#define LEN 4096

struct engine_rank {
	struct nproxy_net *net;
	struct nproxy_hs *hs;
	struct nproxy_comm *c;
	unsigned char src[LEN], dst[LEN];
	struct nproxy_net_addr src_addr, dst_addr;
	struct nproxy_net_op ops[2];
	struct nproxy_fifo_set fs;
};

/* 0, 1 (skip: no shm provider) or -1. */
static int engine_setup(struct engine_rank *r)
{
	struct nproxy_net_opts no = { .size = sizeof(no), .rank = 0, .n_ranks = 1,
				      .timeout_ms = ENGINE_TIMEOUT_MS, .provider = "shm" };
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD,
				     .n_streams = 1, .n_sems = 4 };
	struct nproxy_comm_opts o;
	uint32_t mr_src, mr_dst, i;

	memset(r, 0, sizeof(*r));
	if (nproxy_net_open(&no, &r->net) != NPROXY_SUCCESS)
		return 1;
	if (nproxy_hs_open(&ho, &r->hs) != NPROXY_SUCCESS ||
	    nproxy_net_mr_register(r->net, r->src, LEN, &mr_src) != NPROXY_SUCCESS ||
	    nproxy_net_mr_register(r->net, r->dst, LEN, &mr_dst) != NPROXY_SUCCESS)
		return -1;
	for (i = 0; i < LEN; i++)
		r->src[i] = (unsigned char)(i * 7 + 3);
	r->src_addr.mr = mr_src;
	r->dst_addr.mr = mr_dst;
	fifo_send_recv(&r->fs, r->ops, &r->src_addr, &r->dst_addr, 0, LEN, 2);
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_DEVICE_WAIT, NULL);
	nproxy_net_seam(r->net, &o.seam);
	o.hs = r->hs;
	return nproxy_comm_open(&o, &r->c) ? -1 : 0;
}

static void engine_teardown(struct engine_rank *r)
{
	nproxy_comm_close(r->c);
	nproxy_hs_close(r->hs);
	nproxy_net_close(r->net);
}

static enum nproxy_status engine_enqueue(struct engine_rank *r, uint64_t *ctx)
{
	struct nproxy_cc_op op;

	memset(&op, 0, sizeof(op));
	op.size = sizeof(op);
	op.streams_n = 1;		/* trigger words and semaphores from the comm's region */
	op.streams[0].blocks = &r->fs;
	op.streams[0].n_blocks = 1;
	return nproxy_enq_proxy_tasks(r->c, &op, 1, ctx);
}

/* The device: trigger stream 0, then wait for the completion's semaphore. */
static enum nproxy_status device_trigger_then_wait(struct engine_rank *r)
{
	struct nproxy_prog_step prog[2];

	prog_trigger_then_wait(prog, 2, 20000000000ull);
	return nproxy_hs_submit(r->hs, prog, 2, NULL);
}

TEST(engine_completion_increments_the_semaphore_the_device_waits_on)
{
	struct nproxy_prog_result res;
	struct engine_rank r;
	uint64_t ctx;
	int rc = engine_setup(&r);

	if (rc > 0)
		SKIP(return, "libfabric shm provider unavailable");
	ASSERT_EQ(0, rc);
	ASSERT_ST(NPROXY_SUCCESS, engine_enqueue(&r, &ctx));
	ASSERT_ST(NPROXY_SUCCESS, device_trigger_then_wait(&r));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(r.c, ctx, NPROXY_TASK_NETWORK, 20000));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(r.hs, 20000, &res));
	EXPECT_EQ((unsigned int)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(1u, nproxy_sem_load(nproxy_hs_sem(r.hs, 2)));
	EXPECT_EQ(0, memcmp(r.src, r.dst, LEN));
	engine_teardown(&r);
}

TEST(a_provider_that_refuses_every_post_ends_the_task_at_the_deadline)
{
	struct engine_rank r;
	uint64_t ctx, t0;
	int rc = engine_setup(&r);

	if (rc > 0)
		SKIP(return, "libfabric shm provider unavailable");
	ASSERT_EQ(0, rc);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_fault_set("post_eagain:1"));
	capture_start();
	t0 = now_ns();
	ASSERT_ST(NPROXY_SUCCESS, engine_enqueue(&r, &ctx));
	ASSERT_ST(NPROXY_SUCCESS, device_trigger_then_wait(&r));
	/* The test's own bound is far past the engine's: a hang is a failure. */
	EXPECT_ST(NPROXY_TIMEOUT, nproxy_wait_status(r.c, ctx, NPROXY_TASK_NETWORK,
						     10 * ENGINE_TIMEOUT_MS + 20000));
	TH_LOG("task ended after %llu ms (engine deadline %d ms)",
	       (unsigned long long)(now_ns() - t0) / 1000000, ENGINE_TIMEOUT_MS);
	EXPECT_GE(now_ns() - t0, ENGINE_TIMEOUT_MS * 1000000ull);
	EXPECT_GE(nproxy_fault_injected(), 1u);
	nproxy_fault_set(NULL);
	EXPECT_STRNE("", nproxy_net_strerror(r.net));
	TH_LOG("engine: %s", nproxy_net_strerror(r.net));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(r.net), "-FI_EAGAIN"));
	capture_stop();
	nproxy_hs_cancel(r.hs);
	engine_teardown(&r);
}

TEST_HARNESS_MAIN
