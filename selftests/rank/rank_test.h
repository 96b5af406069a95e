/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the selftests/rank/ programs: forked ranks with a deadline,
 * one ring allgather through a rank's comm, and a census of what a
 * process holds (fds, threads, shared mappings, its /dev/shm files).
 */
#ifndef RANK_TEST_H
#define RANK_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>
#include "nproxy_test.h"

#define RT_MAX_RANKS	12
#define RT_WAIT_MS	30000u	/* generous: 2 shared vCPUs, sanitizers */

#define ASSERT_ST(expected, seen)	ASSERT_EQ((int)(expected), (int)(seen))
#define EXPECT_ST(expected, seen)	EXPECT_EQ((int)(expected), (int)(seen))

/* A bus name no other test (or earlier case of this one) uses. */
static inline void rt_job_id(char *buf, size_t len, const char *what)
{
	static unsigned int seq;

	snprintf(buf, len, "rank-test-%s-%d-%u", what, (int)getpid(), ++seq);
}

/* The options every test starts from: memfd region, shm provider. */
static inline struct nproxy_rank_opts rt_opts(const char *job_id, uint32_t rank, uint32_t n_ranks)
{
	struct nproxy_rank_opts o;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.rank = rank;
	o.n_ranks = n_ranks;
	o.local_rank = rank;
	o.local_size = n_ranks;
	o.job_id = job_id;
	o.provider = "shm";
	o.backend = NPROXY_HS_MEMFD;
	o.open_timeout_ms = RT_WAIT_MS;
	return o;
}

/*
 * Ranks 0..n-1 of fn as forked processes (leaving with _exit()), reaped
 * within timeout_ms: codes[i] is each exit code, 128 + signal, or
 * NPROXY_TEST_KILLED for one killed at the deadline.
 */
static inline void rt_run_forked(uint32_t n, nproxy_test_rank_fn fn, void *arg,
				 unsigned int timeout_ms, int *codes)
{
	const struct nproxy_test_child how = { .quick_exit = true };

	nproxy_test_run_ranks(fn, n, arg, timeout_ms, &how, codes);
}

static inline uint32_t rt_pattern(uint32_t rank, size_t word)
{
	uint32_t x = 0x9E3779B9u * (rank + 1) ^ (uint32_t)word * 0x85EBCA6Bu;

	return x ^ (x >> 15);
}

/*
 * One ring allgather of chunk_words 32-bit words per rank through the
 * rank's comm, as a device would drive it: step s receives chunk
 * (r - s - 1) from the previous rank (completion: semaphore 1 + s) and
 * sends chunk (r - s) to the next, each send after the receive it
 * forwards.  The device program writes the trigger word, then waits for
 * every step's semaphore.  Returns 0, or a line in err saying what failed.
 */
static inline int rt_allgather(struct nproxy_rank *rk, uint32_t rank, uint32_t n_ranks,
			       size_t chunk_words, char *err, size_t err_len)
{
	struct nproxy_net *net = nproxy_rank_net(rk);
	struct nproxy_hs *hs = nproxy_rank_hs(rk);
	struct nproxy_comm *comm = nproxy_rank_comm(rk);
	size_t chunk = chunk_words * 4, len = chunk * n_ranks;
	struct nproxy_net_op ops[2 * RT_MAX_RANKS];
	struct nproxy_net_addr src[RT_MAX_RANKS], dst[RT_MAX_RANKS];
	struct nproxy_fifo_set blocks[RT_MAX_RANKS];
	struct nproxy_prog_step prog[RT_MAX_RANKS + 1];
	struct nproxy_cc_op op = { .size = sizeof(op) };
	struct nproxy_prog_result res;
	uint32_t W = n_ranks, r = rank, mr, n_prog = 0;
	enum nproxy_status st;
	uint32_t *data;
	uint64_t ctx;
	int rc = 1;

	data = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (!data) {
		snprintf(err, err_len, "out of memory");
		return 1;
	}
	memset(data, 0xA5, len);
	for (size_t e = 0; e < chunk_words; e++)
		data[r * chunk_words + e] = rt_pattern(r, r * chunk_words + e);
	st = nproxy_net_mr_register(net, data, len, &mr);
	if (st) {
		snprintf(err, err_len, "mr_register: %s", nproxy_status_str(st));
		free(data);
		return 1;
	}
	memset(ops, 0, sizeof(ops));
	memset(prog, 0, sizeof(prog));
	for (uint32_t s = 0; s + 1 < W; s++) {
		struct nproxy_net_op *recv = &ops[2 * s], *send = &ops[2 * s + 1];

		recv->kind = NPROXY_NET_OP_RECV;
		recv->flags = NPROXY_NET_OP_F_COMPLETE;
		recv->peer = (r + W - 1) % W;
		recv->len = (uint32_t)chunk;
		recv->post_sem = (uint16_t)(1 + s);
		recv->post_inc = 1;
		send->kind = NPROXY_NET_OP_SEND;
		send->peer = (r + 1) % W;
		send->len = (uint32_t)chunk;
		if (s > 0) {
			send->flags = NPROXY_NET_OP_F_PRECOND;
			send->pre_sem = (uint16_t)s;
			send->pre_value = 1;
		}
		src[s] = (struct nproxy_net_addr){ .mr = mr, .offset = (uint64_t)((r + W - s) % W) * chunk };
		dst[s] = (struct nproxy_net_addr){ .mr = mr,
						   .offset = (uint64_t)((r + 2 * W - s - 1) % W) * chunk };
		blocks[s] = (struct nproxy_fifo_set){ .ops = &ops[2 * s], .n_ops = 2,
			.src = &src[s], .n_src = 1, .dst = &dst[s], .n_dst = 1 };
	}
	prog[n_prog++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 };
	for (uint32_t s = 0; s + 1 < W; s++)
		prog[n_prog++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = 1 + s,
			.value = 1, .timeout_ns = (uint64_t)RT_WAIT_MS * 1000000ull };

	nproxy_trigger_store(nproxy_hs_trigger(hs, 0), NPROXY_TRIGGER_SENTINEL);
	st = nproxy_hs_submit(hs, prog, n_prog, NULL);
	if (st) {
		snprintf(err, err_len, "device program submit: %s", nproxy_status_str(st));
		goto out;
	}
	op.streams_n = 1;
	op.streams[0].blocks = blocks;
	op.streams[0].n_blocks = W - 1;
	st = nproxy_enq_proxy_tasks(comm, &op, 1, &ctx);
	if (st) {
		snprintf(err, err_len, "enqueue: %s", nproxy_status_str(st));
		nproxy_hs_cancel(hs);
		nproxy_hs_wait(hs, RT_WAIT_MS, NULL);
		goto out;
	}
	st = nproxy_wait_status(comm, ctx, NPROXY_TASK_NETWORK, RT_WAIT_MS);
	if (st == NPROXY_SUCCESS)
		st = nproxy_wait_status(comm, ctx, NPROXY_TASK_BARRIER, RT_WAIT_MS);
	if (st) {
		snprintf(err, err_len, "task status: %s (%s)", nproxy_status_str(st),
			 nproxy_net_strerror(net));
		nproxy_hs_cancel(hs);
		nproxy_hs_wait(hs, RT_WAIT_MS, NULL);
		goto out;
	}
	st = nproxy_hs_wait(hs, RT_WAIT_MS, &res);
	if (st) {
		snprintf(err, err_len, "device program: %s", nproxy_status_str(st));
		goto out;
	}
	for (size_t e = 0; e < chunk_words * W; e++) {
		if (data[e] != rt_pattern((uint32_t)(e / chunk_words), e)) {
			snprintf(err, err_len, "word %zu (chunk of rank %zu): got 0x%08x, want 0x%08x",
				 e, e / chunk_words, data[e], rt_pattern((uint32_t)(e / chunk_words), e));
			goto out;
		}
	}
	rc = 0;
out:
	nproxy_net_mr_deregister(net, mr);
	free(data);
	return rc;
}

/* ---- census: what a process holds ---- */

struct rt_census {
	int fds, threads, shared_maps, shm_files;
};

static inline struct rt_census rt_census(void)
{
	char prefix[24];
	struct rt_census c;

	/* libfabric shm regions of this process: /dev/shm/<pid>:<uid>:<index>. */
	snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
	c.fds = nproxy_test_count_fds();
	c.threads = nproxy_test_count_threads();
	c.shared_maps = nproxy_test_count_shared_maps();
	c.shm_files = nproxy_test_count_dir("/dev/shm", prefix);
	return c;
}

/* Back to want within 5 s: an exiting thread may linger a moment. */
static inline bool rt_census_settles(struct rt_census want, struct rt_census *got)
{
	uint64_t deadline = nproxy_test_now_ms() + 5000;

	do {
		*got = rt_census();
		if (!memcmp(got, &want, sizeof(want)))
			return true;
		nproxy_test_sleep_ms(2);
	} while (nproxy_test_now_ms() < deadline);
	return false;
}

#endif
