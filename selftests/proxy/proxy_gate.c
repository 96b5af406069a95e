// SPDX-License-Identifier: GPL-2.0
/*
 * The device-trigger gate: ready only when every one of streams_n words is
 * not 0xFFFFFFFF, never reading (or writing) past streams_n; consuming the
 * trigger writes 0; the network task holds in WAITING_DEVICE_TRIGGER until
 * an emulated device triggers it, then runs on the loopback seam.
 */
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "proxy_test_util.h"

#define SENTINEL NPROXY_PROXY_TRIGGER_SENTINEL

static int net_done(struct lb_comm *g)
{
	enum nproxy_status st;
	bool done = false;

	return nproxy_check_status(g->c, g->ctx, NPROXY_TASK_NETWORK, &done, &st) ==
	       NPROXY_SUCCESS && done && st == NPROXY_SUCCESS;
}

static uint64_t lb_progresses(struct lb_comm *g)
{
	struct nproxy_loopback_counters lc;

	nproxy_loopback_counters(g->r.lb, &lc);
	return lc.progresses;
}

TEST(gate_never_touches_words_past_streams_n)
{
	/* Guard pointers into an inaccessible page: any access past streams_n faults. */
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *mem = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile uint32_t *words[4];
	uint32_t *live;
	struct lb_comm g;

	ASSERT_NE(MAP_FAILED, mem);
	ASSERT_EQ(0, mprotect(mem + pg, pg, PROT_NONE));
	live = (uint32_t *)mem;
	live[0] = live[1] = SENTINEL;
	words[0] = &live[0];
	words[1] = &live[1];
	words[2] = (volatile uint32_t *)(mem + pg);
	words[3] = (volatile uint32_t *)(mem + pg + 64);
	ASSERT_EQ(0, gated_start(&g, words, 2, 0));

	/* One of two streams triggered: still waiting, no progress() call. */
	nproxy_trigger_store(words[0], 5);
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 200, 10000));
	EXPECT_FALSE(net_done(&g));
	EXPECT_EQ(0u, lb_progresses(&g));
	EXPECT_EQ(5u, nproxy_trigger_load(words[0]));	/* not consumed early */

	nproxy_trigger_store(words[1], 6);
	ASSERT_TRUE(WAIT_UNTIL(net_done(&g), 10000));
	EXPECT_EQ(0u, live[0]);
	EXPECT_EQ(0u, live[1]);
	EXPECT_TRUE(lb_rank_got(&g.r, 0, 32));
	lb_comm_close(&g);
	munmap(mem, 2 * pg);
}

TEST(guard_words_past_streams_n_keep_their_sentinel)
{
	/* Readable guards holding the sentinel: reading them would block forever. */
	uint32_t w[4] = { SENTINEL, SENTINEL, SENTINEL, SENTINEL };
	volatile uint32_t *words[4] = { &w[0], &w[1], &w[2], &w[3] };
	struct lb_comm g;

	ASSERT_EQ(0, gated_start(&g, words, 1, 0));
	nproxy_trigger_store(&w[0], 9);
	ASSERT_TRUE(WAIT_UNTIL(net_done(&g), 10000));
	EXPECT_EQ(0u, nproxy_trigger_load(&w[0]));
	EXPECT_EQ(SENTINEL, nproxy_trigger_load(&w[1]));	/* never cleared past streams_n */
	EXPECT_EQ(SENTINEL, nproxy_trigger_load(&w[2]));
	EXPECT_EQ(SENTINEL, nproxy_trigger_load(&w[3]));
	lb_comm_close(&g);
}

TEST(consuming_the_trigger_writes_zero_to_every_stream_word)
{
	uint32_t w[4] = { SENTINEL, SENTINEL, SENTINEL, SENTINEL };
	volatile uint32_t *words[4] = { &w[0], &w[1], &w[2], &w[3] };
	struct lb_comm g;
	int i;

	ASSERT_EQ(0, gated_start(&g, words, 4, 0));
	for (i = 0; i < 4; i++)
		nproxy_trigger_store(&w[i], 0x1234u + i);
	ASSERT_TRUE(WAIT_UNTIL(net_done(&g), 10000));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0u, nproxy_trigger_load(&w[i]));
	lb_comm_close(&g);
}

TEST(network_task_holds_until_the_trigger_then_runs_the_block)
{
	uint32_t w[1] = { SENTINEL };
	volatile uint32_t *words[4] = { &w[0], NULL, NULL, NULL };
	struct nproxy_loopback_counters lc;
	struct lb_comm g;

	ASSERT_EQ(0, gated_start(&g, words, 1, 0));
	/* INIT already handed the block to the engine (start), then waited. */
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 100, 10000));
	nproxy_loopback_counters(g.r.lb, &lc);
	EXPECT_EQ(1u, lc.starts);
	EXPECT_EQ(0u, lc.progresses);
	EXPECT_EQ(0u, g.r.sems[0]);
	EXPECT_FALSE(net_done(&g));

	nproxy_trigger_store(&w[0], 1);	/* the emulated device reaches the net stage */
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(g.c, g.ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(g.c, g.ctx, NPROXY_TASK_BARRIER, 10000));
	nproxy_loopback_counters(g.r.lb, &lc);
	EXPECT_EQ(1u, lc.stops);
	EXPECT_EQ(0u, lc.blocks_live);
	EXPECT_EQ(2u, lc.ops_completed);
	EXPECT_EQ(1u, nproxy_sem_load(&g.r.sems[0]));	/* completion back-edge */
	EXPECT_TRUE(lb_rank_got(&g.r, 0, 32));
	lb_comm_close(&g);
}

/*
 * Through real handshake pages (automatic backend: memfd on the host, the
 * module's pages in the VM with NPROXY_HANDSHAKE=kmod): a device program
 * writes the trigger, then waits for the semaphore the recv completion
 * increments.
 */
TEST(device_program_triggers_the_task_and_sees_its_completion)
{
	struct nproxy_prog_step prog[3] = {
		{ .op = NPROXY_STEP_DELAY, .timeout_ns = 20000000 },
	};
	struct nproxy_prog_result res;
	struct nproxy_cc_op op;
	struct hs_comm k;

	if (hs_open_auto(&k.hs) != NPROXY_SUCCESS)
		SKIP(return, "no handshake backend available");
	ASSERT_EQ(SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(k.hs, 0)));
	ASSERT_ST(NPROXY_SUCCESS, hs_comm_open(&k));
	op = hs_comm_op(&k.r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &k.ctx));

	prog_trigger_then_wait(&prog[1], 2, 10000000000ull);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(k.hs, prog, 3, NULL));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_hs_wait(k.hs, 10000, &res));
	EXPECT_EQ((unsigned int)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(0u, nproxy_trigger_load(nproxy_hs_trigger(k.hs, 0)));
	EXPECT_EQ(1u, nproxy_sem_load(nproxy_hs_sem(k.hs, 2)));
	EXPECT_TRUE(lb_rank_got(&k.r, 0, 48));
	nproxy_comm_close(k.c);
	hs_comm_free(&k);
}

TEST_HARNESS_MAIN
