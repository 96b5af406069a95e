// SPDX-License-Identifier: GPL-2.0
/*
 * A block of hundreds of thousands of ops runs like a short one.
 *
 * The engine's no-progress check runs on idle ticks, once a millisecond.
 * It used to look at every op of the block, done or not: with 500k ops
 * that look took about a millisecond, so every idle tick of a ping-pong
 * (each waits for its peer) paid for one, and 250k round trips did not
 * end in minutes (net_pingpong --iters 300000 hung; 140k ran at 15 times
 * the per-message time of 20k).  The check now looks only at the posted
 * ops, from the first op that is not done.
 *
 * The bound here is the rank wait's, 90 s, against about 1.3 s (TSan: 11 s)
 * on this box when the check is right: no test of speed, a test that the
 * block ends.
 */
#include "kselftest_harness.h"
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#include <inttypes.h>
#include <nproxy/seam.h>
#include "ring_common.h"

#define PING_PONGS	250000u

struct big_job {
	char root[64];
};

/* Rank 0 sends first; every later send waits for the receive before it. */
static void ping_pong_ops(struct nproxy_net_op *ops, uint32_t rank)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < PING_PONGS; i++) {
		struct nproxy_net_op send = {
			.kind = NPROXY_NET_OP_SEND, .peer = 1 - rank, .len = 64,
			.flags = NPROXY_NET_OP_F_PRECOND, .pre_sem = 0,
			.pre_value = rank == 0 ? i : i + 1 };
		struct nproxy_net_op recv = {
			.kind = NPROXY_NET_OP_RECV, .peer = 1 - rank, .len = 64,
			.flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 1 };

		ops[k++] = rank == 0 ? send : recv;
		ops[k++] = rank == 0 ? recv : send;
	}
}

static int ping_pong_rank(uint32_t rank, void *arg)
{
	struct big_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = 2, .comm_id = 5,
				     .timeout_ms = 20000, .root = job->root, .provider = "shm" };
	static uint8_t buf[4096];
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_op *ops = calloc(2 * PING_PONGS, sizeof(*ops));
	struct nproxy_net_addr addr = { 0 };
	struct nproxy_fifo_set fs = { .ops = ops, .n_ops = 2 * PING_PONGS, .src = &addr,
				      .n_src = 1, .dst = &addr, .n_dst = 1 };
	struct nproxy_net *net = NULL;
	bool idle, bd = false, done = false;
	struct nproxy_seam seam;
	enum nproxy_status st;

	if (!ops || nproxy_net_open(&o, &net) ||
	    nproxy_net_mr_register(net, buf, sizeof(buf), &addr.mr)) {
		fprintf(stderr, "rank %u: setup failed\n", rank);
		return 1;
	}
	ping_pong_ops(ops, rank);
	nproxy_net_seam(net, &seam);
	st = seam.ops->start(seam.engine, 0, 1, &fs, &dev);
	while (!st && !done)
		st = seam.ops->progress(seam.engine, 0, 1, &idle, &bd, &done);
	seam.ops->stop(seam.engine, 0, 1);
	if (st || sem != PING_PONGS)
		fprintf(stderr, "rank %u: %s after %" PRIu64 " of %u receives: %s\n", rank,
			nproxy_status_str(st), sem, PING_PONGS, nproxy_net_strerror(net));
	nproxy_net_mr_deregister(net, addr.mr);
	nproxy_net_close(net);
	free(ops);
	return st || sem != PING_PONGS;
}

TEST(a_ping_pong_block_of_half_a_million_ops_ends)
{
	struct big_job job = { 0 };

	RING_ASSERT_RANKS_OK(2, ping_pong_rank, &job, job.root, 90000);
}

TEST_HARNESS_MAIN
