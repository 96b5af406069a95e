/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One block on a single-rank shm engine: a recv and a send to itself, for
 * the tests of what the engine accepts (recv_length.c, provider_answers.c).
 */
#ifndef NET_SELF_PAIR_H
#define NET_SELF_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <nproxy/net.h>
#include <nproxy/seam.h>
#include "nproxy_test.h"

static uint8_t self_pair_buf[4096];

/* Run one block of a recv of recv_len and a send of send_len to self. */
static inline enum nproxy_status run_pair(struct nproxy_net *net, uint32_t bb, uint32_t recv_len,
				   uint32_t send_len)
{
	uint64_t sems[2] = { 0 };
	struct nproxy_device_sems dev = { .sems = sems, .n_sems = 2 };
	struct nproxy_net_addr src = { 0 }, dst = { .offset = 1024 };
	struct nproxy_net_op pair[2] = {
		{ .kind = NPROXY_NET_OP_RECV, .peer = 0, .addr_idx = 0, .len = recv_len },
		{ .kind = NPROXY_NET_OP_SEND, .peer = 0, .addr_idx = 0, .len = send_len },
	};
	struct nproxy_fifo_set fs = { .ops = pair, .n_ops = 2, .src = &src, .n_src = 1,
				      .dst = &dst, .n_dst = 1 };
	enum nproxy_status st = NPROXY_SUCCESS;
	struct nproxy_seam seam;
	bool idle, bd = false, done = false;
	uint32_t mr;

	nproxy_net_seam(net, &seam);
	if (nproxy_net_mr_register(net, self_pair_buf, sizeof(self_pair_buf), &mr))
		return NPROXY_RESOURCE;
	src.mr = dst.mr = mr;
	st = seam.ops->start(seam.engine, 0, bb, &fs, &dev);
	for (int i = 0; !st && !done && i < 1000000; i++)
		st = seam.ops->progress(seam.engine, 0, bb, &idle, &bd, &done);
	if (!st && !done)
		st = NPROXY_TIMEOUT;
	seam.ops->stop(seam.engine, 0, bb);
	nproxy_net_mr_deregister(net, mr);
	return st;
}

static inline struct nproxy_net *open_single(void)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1, .timeout_ms = 5000,
				     .provider = "shm" };
	struct nproxy_net *net = NULL;

	return nproxy_net_open(&o, &net) == NPROXY_SUCCESS ? net : NULL;
}

struct self_pair_case {
	int (*fn)(void);
};

static inline int self_pair_run_case(uint32_t rank, uint32_t n_ranks, void *arg)
{
	(void)rank;
	(void)n_ranks;
	return ((struct self_pair_case *)arg)->fn();
}

/* fn in a forked child (per-process settings and mappings), reaped within
 * 30 s: its exit status, or NPROXY_TEST_KILLED. */
static inline int in_child(int (*fn)(void))
{
	struct self_pair_case c = { .fn = fn };
	int status = NPROXY_TEST_KILLED;

	nproxy_test_run_ranks(self_pair_run_case, 1, &c, 30000, NULL, &status);
	return status;
}

#endif
