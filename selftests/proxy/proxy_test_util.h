/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the selftests/proxy/ programs: thread census,
 * log capture, per-thread CPU time, comm/op builders on the loopback seam.
 */
#ifndef PROXY_TEST_UTIL_H
#define PROXY_TEST_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"
#include "seam_loopback.h"

struct proxy_threads {
	int n, misnamed;
};

static inline void count_proxy_thread(const char *tid, const char *comm, void *arg)
{
	struct proxy_threads *c = arg;
	char want[300];

	if (strncmp(comm, "proxy-", 6))
		return;
	c->n++;
	snprintf(want, sizeof(want), "proxy-%s", tid);
	if (strcmp(comm, want))
		c->misnamed++;
}

/* Threads named "proxy-*"; *misnamed counts those not named "proxy-<their tid>". */
static inline int count_proxy_threads(int *misnamed)
{
	struct proxy_threads c = { 0, 0 };

	if (nproxy_test_each_thread(count_proxy_thread, &c) < 0)
		return -1;
	if (misnamed)
		*misnamed = c.misnamed;
	return c.n;
}

/* Status comparisons: the harness compares with ==, enums are unsigned. */
#define ASSERT_ST(expected, expr) ASSERT_EQ((int)(expected), (int)(expr))
#define EXPECT_ST(expected, expr) EXPECT_EQ((int)(expected), (int)(expr))

/* ---- log capture ---- */
#define CAPTURE_MAX 256
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static char capture_msgs[CAPTURE_MAX][512];
static int capture_n;

static inline void capture_sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	pthread_mutex_lock(&capture_lock);
	if (capture_n < CAPTURE_MAX)
		snprintf(capture_msgs[capture_n++], sizeof(capture_msgs[0]), "%s", msg);
	pthread_mutex_unlock(&capture_lock);
}

static inline void capture_start(void)
{
	pthread_mutex_lock(&capture_lock);
	capture_n = 0;
	pthread_mutex_unlock(&capture_lock);
	nproxy_log_set_sink(capture_sink, NULL);
}

static inline void capture_stop(void)
{
	nproxy_log_set_sink(NULL, NULL);
}

/* Messages containing needle (exact match when exact). */
static inline int capture_count(const char *needle, int exact)
{
	int i, n = 0;

	pthread_mutex_lock(&capture_lock);
	for (i = 0; i < capture_n; i++)
		if (exact ? !strcmp(capture_msgs[i], needle) : !!strstr(capture_msgs[i], needle))
			n++;
	pthread_mutex_unlock(&capture_lock);
	return n;
}

/* ---- time: the shared helpers (testlib/nproxy_test.h) by this area's names ---- */
static inline uint64_t now_ns(void)
{
	return nproxy_test_now_ns();
}

static inline void sleep_ms(unsigned int ms)
{
	nproxy_test_sleep_ms(ms);
}

/* CPU time (ns) consumed by thread tid of this process. */
static inline uint64_t thread_cpu_ns(int tid)
{
	return nproxy_test_thread_cpu_ns(tid);
}

static inline struct nproxy_proxy_stats group_stats(uint32_t gid)
{
	struct nproxy_proxy_stats st;

	memset(&st, 0, sizeof(st));
	nproxy_proxy_group_stats(gid, &st);
	return st;
}

/* Wait (bounded) until the group's stats satisfy pred. */
#define WAIT_UNTIL(cond, timeout_ms) ({					\
	uint64_t __dl = now_ns() + (uint64_t)(timeout_ms) * 1000000ull;	\
	int __ok;							\
	while (!(__ok = !!(cond)) && now_ns() < __dl)			\
		sleep_ms(1);						\
	__ok; })

/* ---- comm / op builders ---- */
static inline struct nproxy_comm_opts comm_opts(uint32_t rank, uint32_t n_ranks, uint32_t dev,
						uint32_t rpp, uint32_t flags,
						struct nproxy_loopback *lb)
{
	struct nproxy_comm_opts o = {
		.size = sizeof(o), .rank = rank, .n_ranks = n_ranks, .device_index = dev,
		.ranks_per_proxy = rpp, .flags = flags, .idle_policy = NPROXY_IDLE_YIELD,
	};

	if (lb) {
		o.seam = nproxy_loopback_seam(lb);
		o.barrier = nproxy_loopback_barrier(lb);
	}
	return o;
}

/* An op with streams_n streams, all trigger words = words[i]. */
static inline struct nproxy_cc_op cc_op(uint32_t streams_n, volatile uint32_t **words,
					volatile uint64_t *sems, uint32_t n_sems)
{
	struct nproxy_cc_op op;
	uint32_t i;

	memset(&op, 0, sizeof(op));
	op.size = sizeof(op);
	op.streams_n = streams_n;
	for (i = 0; i < streams_n; i++)
		op.trigger_words[i] = words[i];
	op.dev.sems = sems;
	op.dev.n_sems = n_sems;
	return op;
}

/*
 * One block of two ops in fs: send len bytes from src to peer, receive len
 * bytes from peer into dst, the recv adding 1 to semaphore post_sem when it
 * completes (the completion back-edge).
 */
static inline void fifo_send_recv(struct nproxy_fifo_set *fs, struct nproxy_net_op ops[2],
				  struct nproxy_net_addr *src, struct nproxy_net_addr *dst,
				  uint32_t peer, uint32_t len, uint32_t post_sem)
{
	ops[0] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_SEND, .peer = peer, .len = len };
	ops[1] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_RECV, .peer = peer, .len = len,
					 .flags = NPROXY_NET_OP_F_COMPLETE,
					 .post_sem = post_sem, .post_inc = 1 };
	*fs = (struct nproxy_fifo_set){ .ops = ops, .n_ops = 2, .src = src, .n_src = 1,
					.dst = dst, .n_dst = 1 };
}

/*
 * One rank of a loopback exchange: a single basic block on stream 0 that
 * sends len bytes to peer and receives len bytes from peer, with open
 * trigger words and a private semaphore page.
 */
struct lb_rank {
	struct nproxy_loopback *lb;
	unsigned char src[256], dst[256];
	struct nproxy_net_addr src_addr, dst_addr;
	struct nproxy_net_op ops[2];
	struct nproxy_fifo_set fs;
	uint32_t trig[NPROXY_PROXY_MAX_STREAMS];
	uint64_t sems[8];
	volatile uint32_t *words[NPROXY_PROXY_MAX_STREAMS];
};

static inline int lb_rank_setup(struct lb_rank *r, struct nproxy_loopback_fabric *f,
				uint32_t rank, uint32_t peer, uint32_t len)
{
	uint32_t mr_src, mr_dst, i;

	memset(r, 0, sizeof(*r));
	if (nproxy_loopback_create(f, rank, &r->lb) ||
	    nproxy_loopback_mr_register(r->lb, r->src, sizeof(r->src), &mr_src) ||
	    nproxy_loopback_mr_register(r->lb, r->dst, sizeof(r->dst), &mr_dst))
		return -1;
	for (i = 0; i < sizeof(r->src); i++)
		r->src[i] = (unsigned char)(rank * 31 + i);
	r->src_addr.mr = mr_src;
	r->dst_addr.mr = mr_dst;
	fifo_send_recv(&r->fs, r->ops, &r->src_addr, &r->dst_addr, peer, len, 0);
	for (i = 0; i < NPROXY_PROXY_MAX_STREAMS; i++)
		r->words[i] = &r->trig[i];	/* 0: already triggered */
	return 0;
}

static inline struct nproxy_cc_op lb_rank_op(struct lb_rank *r)
{
	struct nproxy_cc_op op = cc_op(1, r->words, r->sems, 8);

	op.streams[0].blocks = &r->fs;
	op.streams[0].n_blocks = 1;
	return op;
}

/* Did rank r receive what peer sent (len bytes)? */
static inline int lb_rank_got(const struct lb_rank *r, uint32_t peer, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (r->dst[i] != (unsigned char)(peer * 31 + i))
			return 0;
	return 1;
}

/* A one-rank comm on a new loopback fabric; its rank r sends 32 bytes to itself. */
struct lb_comm {
	struct nproxy_loopback_fabric *f;
	struct lb_rank r;
	struct nproxy_comm *c;
	uint64_t ctx;		/* the op gated_start() enqueued */
};

/* The fabric and the rank; *o: the options of a comm of device dev over them. */
static inline int lb_comm_prepare(struct lb_comm *k, uint32_t dev, uint32_t flags,
				  struct nproxy_comm_opts *o)
{
	if (nproxy_loopback_fabric_create(1, &k->f) || lb_rank_setup(&k->r, k->f, 0, 0, 32))
		return -1;
	*o = comm_opts(0, 1, dev, 1, flags, k->r.lb);
	return 0;
}

static inline void lb_comm_close(struct lb_comm *k)
{
	nproxy_comm_close(k->c);
	nproxy_loopback_destroy(k->r.lb);
	nproxy_loopback_fabric_destroy(k->f);
}

/*
 * The comm (device dev, DEVICE_WAIT) and one op enqueued, whose network task
 * waits on words[0 .. streams_n) (all four entries are set: the ones past
 * streams_n are guards); words NULL: on r's own words, word 0 closed.
 */
static inline int gated_start(struct lb_comm *g, volatile uint32_t **words, uint32_t streams_n,
			      uint32_t dev)
{
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	uint32_t i;

	if (lb_comm_prepare(g, dev, NPROXY_COMM_F_DEVICE_WAIT, &o))
		return -1;
	if (!words)
		g->r.trig[0] = NPROXY_PROXY_TRIGGER_SENTINEL;
	if (nproxy_comm_open(&o, &g->c))
		return -1;
	op = lb_rank_op(&g->r);
	op.streams_n = streams_n;
	for (i = 0; words && i < NPROXY_PROXY_MAX_STREAMS; i++)
		op.trigger_words[i] = words[i];
	return nproxy_enq_proxy_tasks(g->c, &op, 1, &g->ctx) ? -1 : 0;
}

/*
 * Handshake pages on the automatic backend (memfd on the host, the
 * module's in the VM); the log says which.
 */
static inline enum nproxy_status hs_open_auto(struct nproxy_hs **hs)
{
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_AUTO,
				     .n_streams = 1, .n_sems = 4 };
	enum nproxy_status st = nproxy_hs_open(&ho, hs);

	if (st == NPROXY_SUCCESS)
		fprintf(stderr, "# handshake backend: %s\n",
			nproxy_hs_backend_name(nproxy_hs_backend_of(*hs)));
	return st;
}

/*
 * A one-rank comm on a new loopback fabric that waits for the device on the
 * handshake pages hs; its rank r exchanges 48 bytes with itself.
 */
struct hs_comm {
	struct nproxy_hs *hs;
	struct nproxy_loopback_fabric *f;
	struct lb_rank r;
	struct nproxy_comm *c;
	uint64_t ctx;
};

/* k->hs open: the comm. */
static inline enum nproxy_status hs_comm_open(struct hs_comm *k)
{
	struct nproxy_comm_opts o;
	enum nproxy_status st = nproxy_loopback_fabric_create(1, &k->f);

	if (st != NPROXY_SUCCESS)
		return st;
	if (lb_rank_setup(&k->r, k->f, 0, 0, 48))
		return NPROXY_FAILURE;
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_DEVICE_WAIT, k->r.lb);
	o.hs = k->hs;
	return nproxy_comm_open(&o, &k->c);
}

/* After nproxy_comm_close(k->c): the pages and the fabric. */
static inline void hs_comm_free(struct hs_comm *k)
{
	nproxy_hs_close(k->hs);
	nproxy_loopback_destroy(k->r.lb);
	nproxy_loopback_fabric_destroy(k->f);
}

/* r's op with the comm region's trigger words and semaphores; the recv posts sem 2. */
static inline struct nproxy_cc_op hs_comm_op(struct lb_rank *r)
{
	struct nproxy_cc_op op = lb_rank_op(r);

	op.trigger_words[0] = NULL;
	op.dev.sems = NULL;
	op.dev.n_sems = 0;
	r->ops[1].post_sem = 2;
	return op;
}

/* Device program steps from 'at': write trigger 0, then wait for semaphore sem to reach 1. */
static inline void prog_trigger_then_wait(struct nproxy_prog_step *at, uint32_t sem,
					  uint64_t timeout_ns)
{
	at[0] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 };
	at[1] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = sem, .value = 1,
					   .timeout_ns = timeout_ns };
}

#endif
