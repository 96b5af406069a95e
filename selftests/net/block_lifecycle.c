// SPDX-License-Identifier: GPL-2.0
/*
 * A basic block's life in the libfabric engine, seen through the seam:
 *
 *  - a local COPY moves its bytes, and its completion semaphore counts it;
 *  - progress() says a stream is done only once every block started on it
 *    is, not when the block it was asked about is;
 *  - a REDUCE runs 64 KiB a tick, counts once whole, and holds the local
 *    ops after it until then.
 */
#include "kselftest_harness.h"
#include <nproxy/seam.h>
#include "ring_common.h"

/* Progress (stream 0, bb) until its block is done or 5 s passed. */
static enum nproxy_status run_block(struct nproxy_seam *seam, uint32_t bb, bool *done)
{
	int64_t end = ring_now_ms() + 5000;
	bool idle, block_done = false;
	enum nproxy_status st = NPROXY_SUCCESS;

	while (st == NPROXY_SUCCESS && !block_done && ring_now_ms() < end)
		st = seam->ops->progress(seam->engine, 0, bb, &idle, &block_done, done);
	return block_done || st ? st : NPROXY_TIMEOUT;
}

TEST(a_copy_moves_its_bytes_and_counts_on_its_semaphore)
{
	struct nproxy_net *net = ring_open_single(5000, NULL);
	static uint8_t buf[8192];
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_op op = { .kind = NPROXY_NET_OP_COPY, .len = 3000,
				    .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 2 };
	struct nproxy_net_addr src = { .offset = 100 }, dst = { .offset = 5000 };
	struct nproxy_fifo_set fs = { .ops = &op, .n_ops = 1, .src = &src, .n_src = 1,
				      .dst = &dst, .n_dst = 1 };
	struct nproxy_seam seam;
	bool done = false;

	ASSERT_NE(NULL, net);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &src.mr));
	dst.mr = src.mr;
	nproxy_net_seam(net, &seam);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 1, &fs, &dev));
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)run_block(&seam, 1, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ(2u, sem);
	for (size_t i = 0; i < op.len; i++)
		if (buf[5000 + i] != (uint8_t)((100 + i) * 7 + 1)) {
			EXPECT_EQ((uint8_t)((100 + i) * 7 + 1), buf[5000 + i]) TH_LOG("byte %zu", i);
			break;
		}
	EXPECT_EQ((uint8_t)(99 * 7 + 1), buf[99]);	/* the source is left as it was */
	EXPECT_EQ((uint8_t)(4999 * 7 + 1), buf[4999]);	/* nothing before the copy */
	EXPECT_EQ((uint8_t)(8000 * 7 + 1), buf[8000]);	/* nor after it */
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 1));
	nproxy_net_mr_deregister(net, src.mr);
	nproxy_net_close(net);
}

TEST(a_stream_is_done_only_when_all_its_blocks_are)
{
	struct nproxy_net *net = ring_open_single(5000, NULL);
	static uint8_t buf[256];
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_op now = { .kind = NPROXY_NET_OP_COPY, .len = 16 };
	/* Held until the device's semaphore reaches 1. */
	struct nproxy_net_op held = { .kind = NPROXY_NET_OP_COPY, .len = 16,
				      .flags = NPROXY_NET_OP_F_PRECOND, .pre_sem = 0, .pre_value = 1 };
	struct nproxy_net_addr src = { .offset = 0 }, dst = { .offset = 128 };
	struct nproxy_fifo_set fs_now = { .ops = &now, .n_ops = 1, .src = &src, .n_src = 1,
					  .dst = &dst, .n_dst = 1 };
	struct nproxy_fifo_set fs_held = fs_now;
	struct nproxy_seam seam;
	bool done = true;

	ASSERT_NE(NULL, net);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &src.mr));
	dst.mr = src.mr;
	fs_held.ops = &held;
	nproxy_net_seam(net, &seam);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 1, &fs_held, &dev));
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 2, &fs_now, &dev));
	/* Block 2 ends; block 1 of the same stream waits: the stream is not done. */
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)run_block(&seam, 2, &done));
	EXPECT_FALSE(done);
	sem = 1;
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)run_block(&seam, 1, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 2));
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 1));
	nproxy_net_mr_deregister(net, src.mr);
	nproxy_net_close(net);
}

/*
 * A REDUCE runs 64 KiB a tick (the provider's transfers move between
 * slices), counts on its semaphore only once whole, and holds the local
 * ops after it until then: they run in FIFO order.
 */
TEST(a_large_reduce_runs_a_slice_a_tick_and_holds_the_local_ops_after_it)
{
	enum { N = (256 << 10) / 4, SLICE = (64 << 10) / 4 };
	struct nproxy_net *net = ring_open_single(5000, NULL);
	static uint32_t buf[2 * N + 1024];
	uint32_t *acc = buf, *in = buf + N, *copy = buf + 2 * N;
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_op ops[2] = {
		{ .kind = NPROXY_NET_OP_REDUCE, .len = N * 4, .addr_idx = 0,
		  .dtype = NPROXY_UINT32, .redop = NPROXY_SUM,
		  .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 1 },
		{ .kind = NPROXY_NET_OP_COPY, .len = 4096, .addr_idx = 1 },
	};
	struct nproxy_net_addr src[2] = { { .offset = N * 4 }, { .offset = 0 } };
	struct nproxy_net_addr dst[2] = { { .offset = 0 }, { .offset = 2 * N * 4 } };
	struct nproxy_fifo_set fs = { .ops = ops, .n_ops = 2, .src = src, .n_src = 2,
				      .dst = dst, .n_dst = 2 };
	struct nproxy_seam seam;
	bool idle, block_done = true, done = true;
	uint32_t mr;

	ASSERT_NE(NULL, net);
	for (uint32_t i = 0; i < N; i++) {
		acc[i] = i;
		in[i] = 1000000;
	}
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &mr));
	src[0].mr = src[1].mr = dst[0].mr = dst[1].mr = mr;
	nproxy_net_seam(net, &seam);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 1, &fs, &dev));
	for (uint32_t tick = 1; tick < N / SLICE; tick++) {
		ASSERT_EQ((int)NPROXY_SUCCESS,
			  (int)seam.ops->progress(seam.engine, 0, 1, &idle, &block_done, &done));
		EXPECT_FALSE(idle);	/* a slice is work: the driver must come back */
		EXPECT_FALSE(block_done);
		EXPECT_EQ(tick * SLICE - 1 + 1000000u, acc[tick * SLICE - 1]);
		EXPECT_EQ(tick * SLICE, acc[tick * SLICE]) TH_LOG("tick %u ran past its slice", tick);
		EXPECT_EQ(0u, copy[0]) TH_LOG("tick %u: the COPY ran before the REDUCE ended", tick);
		EXPECT_EQ(0u, sem);
	}
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)run_block(&seam, 1, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ(1u, sem);
	for (uint32_t i = 0; i < N; i++)
		if (acc[i] != i + 1000000u) {
			EXPECT_EQ(i + 1000000u, acc[i]) TH_LOG("element %u", i);
			break;
		}
	/* The COPY read the reduced values. */
	for (uint32_t i = 0; i < 1024; i++)
		if (copy[i] != i + 1000000u) {
			EXPECT_EQ(i + 1000000u, copy[i]) TH_LOG("copied element %u", i);
			break;
		}
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 1));
	nproxy_net_mr_deregister(net, mr);
	nproxy_net_close(net);
}

TEST_HARNESS_MAIN
