/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the net selftests: ring all-gather and ring all-reduce driven
 * straight through the seam (start / progress / stop) of a libfabric
 * engine, with the "device" played by the test loop: semaphores in local
 * memory gate sends (preconditions) and count completions, and the
 * all-reduce's reductions happen between a recv completing and the next
 * send being allowed -- what the on-device program does.
 *
 * Also, by this area's names: forking N ranks with a bounded wait, and a
 * free port for the rendezvous on 127.0.0.1 (testlib/nproxy_test.h).
 */
#ifndef NET_RING_COMMON_H
#define NET_RING_COMMON_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include "nproxy_test.h"

/* nproxy_rdzv_open() from its fields. */
static inline enum nproxy_status ring_rdzv_open(const char *root, uint32_t rank, uint32_t n,
						uint32_t timeout_ms, struct nproxy_rdzv **rz)
{
	const struct nproxy_rdzv_opts o = {
		.size = sizeof(o), .root = root, .rank = rank, .n_ranks = n, .timeout_ms = timeout_ms,
	};

	return nproxy_rdzv_open(&o, rz);
}

/* The shared helpers (testlib/nproxy_test.h) by this area's names. */
static inline int64_t ring_now_ms(void)
{
	return (int64_t)nproxy_test_now_ms();
}

/* A net of one rank on shm (no peers): NULL if it fails, *st (when given) says why. */
static inline struct nproxy_net *ring_open_single(uint32_t timeout_ms, enum nproxy_status *st)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1,
				     .timeout_ms = timeout_ms, .provider = "shm" };
	struct nproxy_net *net = NULL;
	enum nproxy_status rc = nproxy_net_open(&o, &net);

	if (st)
		*st = rc;
	return rc == NPROXY_SUCCESS ? net : NULL;
}

/* Byte i of rank r's contribution. */
static inline uint8_t ring_pattern(uint32_t r, size_t i, uint32_t salt)
{
	return (uint8_t)(i * 7 + r * 13 + salt * 31 + 1 + (i >> 8));
}

static inline size_t chunk_off(size_t size, uint32_t n, uint32_t c)
{
	return size * c / n;
}

static inline size_t chunk_len(size_t size, uint32_t n, uint32_t c)
{
	return chunk_off(size, n, c + 1) - chunk_off(size, n, c);
}

/* The test's own backstop: the engine's timeout is what is under test. */
#define RING_BACKSTOP_MS(engine_timeout_ms)	(4 * (engine_timeout_ms) + 30000)

/* Microseconds an idle tick sleeps in ring_drive(); 0: spin. */
static unsigned int ring_idle_nap_us;

/* Drive one block to block_done (or error / deadline), running `device` each tick. */
typedef void (*ring_device_fn)(void *arg);

static inline enum nproxy_status ring_drive(struct nproxy_seam *seam, uint32_t stream, uint32_t bb,
					    ring_device_fn device, void *arg, int timeout_ms)
{
	int64_t deadline = ring_now_ms() + timeout_ms;
	bool idle, block_done = false, done = false;
	enum nproxy_status st = NPROXY_SUCCESS;

	while (!block_done) {
		st = seam->ops->progress(seam->engine, stream, bb, &idle, &block_done, &done);
		if (st != NPROXY_SUCCESS)
			return st;
		if (device)
			device(arg);
		/* Many ranks on few cpus (net_scale.sh): let the others run. */
		if (idle && ring_idle_nap_us)
			usleep(ring_idle_nap_us);
		if (ring_now_ms() > deadline) {
			fprintf(stderr, "ring_drive: test deadline of %d ms passed\n", timeout_ms);
			return NPROXY_TIMEOUT;
		}
	}
	return st;
}

/*
 * Ring all-gather of `size` bytes per rank: buf holds n chunks of size;
 * step s sends chunk (r - s) and receives chunk (r - s - 1).  A send after
 * step 0 forwards what the previous recv delivered: precondition sem[0] >= s,
 * every recv adds 1 to sem[0], every send adds 1 to sem[1].
 */
static inline int ring_allgather(struct nproxy_net *net, size_t size, uint32_t salt, uint32_t bb,
				 int timeout_ms)
{
	uint32_t r = nproxy_net_rank(net), n = nproxy_net_size(net);
	uint32_t right = (r + 1) % n, left = (r + n - 1) % n;
	size_t total = size * n;
	uint8_t *buf = malloc(total ? total : 1);
	struct nproxy_net_op *ops = calloc(2 * n, sizeof(*ops));
	struct nproxy_net_addr *addrs = calloc(n, sizeof(*addrs));
	uint64_t sems[2] = { 0, 0 };
	struct nproxy_device_sems dev = { .sems = sems, .n_sems = 2 };
	struct nproxy_seam seam;
	struct nproxy_fifo_set fs;
	enum nproxy_status st;
	uint32_t mr, n_ops = 0;
	int bad = 0;

	if (!buf || !ops || !addrs)
		return -1;
	memset(buf, 0xee, total);
	for (size_t i = 0; i < size; i++)
		buf[r * size + i] = ring_pattern(r, i, salt);
	st = nproxy_net_mr_register(net, buf, total ? total : 1, &mr);
	if (st) {
		fprintf(stderr, "rank %u: mr_register: %s\n", r, nproxy_status_str(st));
		return -1;
	}
	for (uint32_t c = 0; c < n; c++)
		addrs[c] = (struct nproxy_net_addr){ .mr = mr, .offset = c * size };
	for (uint32_t s = 0; s + 1 < n; s++) {
		ops[n_ops++] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_SEND, .peer = right, .addr_idx = (r + n - s) % n,
			.len = (uint32_t)size, .flags = NPROXY_NET_OP_F_COMPLETE |
			(s ? NPROXY_NET_OP_F_PRECOND : 0), .pre_sem = 0, .pre_value = s,
			.post_sem = 1, .post_inc = 1 };
		ops[n_ops++] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_RECV, .peer = left, .addr_idx = (r + 2 * n - s - 1) % n,
			.len = (uint32_t)size, .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0,
			.post_inc = 1 };
	}
	fs = (struct nproxy_fifo_set){ .ops = ops, .n_ops = n_ops, .src = addrs, .n_src = n,
				       .dst = addrs, .n_dst = n };
	nproxy_net_seam(net, &seam);
	st = seam.ops->start(seam.engine, 0, bb, &fs, &dev);
	if (!st)
		st = ring_drive(&seam, 0, bb, NULL, NULL, RING_BACKSTOP_MS(timeout_ms));
	if (st) {
		fprintf(stderr, "rank %u: all-gather of %zu: %s: %s\n", r, size,
			nproxy_status_str(st), nproxy_net_strerror(net));
		bad = -(int)st;
	}
	seam.ops->stop(seam.engine, 0, bb);
	if (!bad && (sems[0] != n - 1 || sems[1] != n - 1)) {
		fprintf(stderr, "rank %u: completion semaphores %lu/%lu, want %u\n", r,
			(unsigned long)sems[0], (unsigned long)sems[1], n - 1);
		bad = -1;
	}
	for (uint32_t c = 0; !bad && c < n; c++)
		for (size_t i = 0; i < size; i++)
			if (buf[c * size + i] != ring_pattern(c, i, salt)) {
				fprintf(stderr, "rank %u: all-gather %zu: chunk %u byte %zu is %#x, want %#x\n",
					r, size, c, i, buf[c * size + i], ring_pattern(c, i, salt));
				bad = -1;
				break;
			}
	nproxy_net_mr_deregister(net, mr);
	free(buf);
	free(ops);
	free(addrs);
	return bad;
}

/* The all-reduce's "device": reduce what arrived, then let the next send go. */
struct ring_ar_dev {
	uint32_t r, n;
	size_t size;
	uint8_t *acc, *tmp;
	uint64_t *sems;		/* 0: RS recvs, 1: RS reductions done, 2: AG recvs */
	uint32_t reduced;
};

static inline void ring_ar_device(void *arg)
{
	struct ring_ar_dev *d = arg;

	while (d->reduced < nproxy_sem_load(&d->sems[0])) {
		uint32_t s = d->reduced, c = (d->r + 2 * d->n - s - 1) % d->n;
		size_t off = chunk_off(d->size, d->n, c), len = chunk_len(d->size, d->n, c);

		for (size_t i = 0; i < len; i++)
			d->acc[off + i] += d->tmp[s * d->size + off + i];
		d->reduced++;
		nproxy_sem_add(&d->sems[1], 1);
	}
}

/*
 * A ring all-reduce's buffers and ops on rank r of n: acc (this rank's
 * `size` bytes, then the sum), tmp (slot s: reduce-scatter step s's
 * incoming chunk, at its offset); fs[0] the reduce-scatter (its sends wait
 * for semaphore 1, the reductions done; its recvs add to 0), fs[1] the
 * all-gather (its recvs add to 2).
 */
struct ring_ar_plan {
	uint32_t r, n;
	size_t size;
	uint8_t *acc, *tmp;
	struct nproxy_net_op *rs, *ag;
	struct nproxy_net_addr *a_acc, *a_tmp;
	uint32_t mr_acc, mr_tmp;
	struct nproxy_fifo_set fs[2];
};

static inline void ring_ar_ops(struct ring_ar_plan *p)
{
	uint32_t r = p->r, n = p->n, right = (r + 1) % n, left = (r + n - 1) % n, k = 0;
	size_t size = p->size;

	for (uint32_t s = 0; s + 1 < n; s++, k += 2) {
		uint32_t cs = (r + n - s) % n, cr = (r + 2 * n - s - 1) % n;

		p->a_tmp[s].offset = s * size + chunk_off(size, n, cr);
		p->rs[k] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_SEND, .peer = right, .addr_idx = cs,
			.len = (uint32_t)chunk_len(size, n, cs),
			.flags = s ? NPROXY_NET_OP_F_PRECOND : 0, .pre_sem = 1, .pre_value = s };
		p->rs[k + 1] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_RECV, .peer = left, .addr_idx = s,
			.len = (uint32_t)chunk_len(size, n, cr), .flags = NPROXY_NET_OP_F_COMPLETE,
			.post_sem = 0, .post_inc = 1 };
		cs = (r + 1 + n - s) % n;
		cr = (r + n - s) % n;
		p->ag[k] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_SEND, .peer = right, .addr_idx = cs,
			.len = (uint32_t)chunk_len(size, n, cs), .flags = NPROXY_NET_OP_F_PRECOND,
			.pre_sem = s ? 2 : 1, .pre_value = s ? s : n - 1 };
		p->ag[k + 1] = (struct nproxy_net_op){
			.kind = NPROXY_NET_OP_RECV, .peer = left, .addr_idx = cr,
			.len = (uint32_t)chunk_len(size, n, cr), .flags = NPROXY_NET_OP_F_COMPLETE,
			.post_sem = 2, .post_inc = 1 };
	}
	p->fs[0] = (struct nproxy_fifo_set){ .ops = p->rs, .n_ops = k, .src = p->a_acc, .n_src = n,
					     .dst = p->a_tmp, .n_dst = n };
	p->fs[1] = (struct nproxy_fifo_set){ .ops = p->ag, .n_ops = k, .src = p->a_acc, .n_src = n,
					     .dst = p->a_acc, .n_dst = n };
}

/* 0, or -1 with nothing to free (ring_ar_plan_free() is still safe). */
static inline int ring_ar_plan_init(struct ring_ar_plan *p, struct nproxy_net *net, size_t size,
				    uint32_t salt)
{
	uint32_t r = nproxy_net_rank(net), n = nproxy_net_size(net);

	*p = (struct ring_ar_plan){ .r = r, .n = n, .size = size,
		.acc = malloc(size ? size : 1), .tmp = calloc(1, size * n + 1),
		.rs = calloc(2 * n, sizeof(*p->rs)), .ag = calloc(2 * n, sizeof(*p->ag)),
		.a_acc = calloc(n, sizeof(*p->a_acc)), .a_tmp = calloc(n, sizeof(*p->a_tmp)),
		.mr_acc = UINT32_MAX, .mr_tmp = UINT32_MAX };
	if (!p->acc || !p->tmp || !p->rs || !p->ag || !p->a_acc || !p->a_tmp)
		return -1;
	for (size_t i = 0; i < size; i++)
		p->acc[i] = ring_pattern(r, i, salt);
	if (nproxy_net_mr_register(net, p->acc, size ? size : 1, &p->mr_acc) ||
	    nproxy_net_mr_register(net, p->tmp, size * n + 1, &p->mr_tmp))
		return -1;
	/* src/dst index c: chunk c of acc. */
	for (uint32_t c = 0; c < n; c++) {
		p->a_acc[c] = (struct nproxy_net_addr){ .mr = p->mr_acc,
							.offset = chunk_off(size, n, c) };
		p->a_tmp[c] = (struct nproxy_net_addr){ .mr = p->mr_tmp, .offset = c * size };
	}
	ring_ar_ops(p);
	return 0;
}

/* Is acc every rank's pattern summed?  0, or -1 saying the first wrong byte. */
static inline int ring_ar_check(const struct ring_ar_plan *p, uint32_t salt)
{
	for (size_t i = 0; i < p->size; i++) {
		uint8_t want = 0;

		for (uint32_t q = 0; q < p->n; q++)
			want += ring_pattern(q, i, salt);
		if (p->acc[i] != want) {
			fprintf(stderr, "rank %u: all-reduce %zu: byte %zu is %#x, want %#x\n", p->r,
				p->size, i, p->acc[i], want);
			return -1;
		}
	}
	return 0;
}

static inline void ring_ar_plan_free(struct ring_ar_plan *p, struct nproxy_net *net)
{
	if (p->mr_acc != UINT32_MAX)
		nproxy_net_mr_deregister(net, p->mr_acc);
	if (p->mr_tmp != UINT32_MAX)
		nproxy_net_mr_deregister(net, p->mr_tmp);
	free(p->acc);
	free(p->tmp);
	free(p->rs);
	free(p->ag);
	free(p->a_acc);
	free(p->a_tmp);
}

/*
 * Ring all-reduce (byte-wise sum mod 256) of `size` bytes: reduce-scatter
 * in block bb, all-gather in block bb + 1, so the test also switches
 * blocks (stop of the first, progress of the second) the way the proxy
 * task does.
 */
static inline int ring_allreduce(struct nproxy_net *net, size_t size, uint32_t salt, uint32_t bb,
				 int timeout_ms)
{
	uint64_t sems[3] = { 0, 0, 0 };
	struct nproxy_device_sems dev = { .sems = sems, .n_sems = 3 };
	struct ring_ar_plan p;
	struct ring_ar_dev d;
	struct nproxy_seam seam;
	enum nproxy_status st;
	int bad = 0;

	if (ring_ar_plan_init(&p, net, size, salt)) {
		ring_ar_plan_free(&p, net);
		return -1;
	}
	d = (struct ring_ar_dev){ .r = p.r, .n = p.n, .size = size, .acc = p.acc, .tmp = p.tmp,
				  .sems = sems };
	nproxy_net_seam(net, &seam);
	st = seam.ops->start(seam.engine, 1, bb, &p.fs[0], &dev);
	if (!st)
		st = seam.ops->start(seam.engine, 1, bb + 1, &p.fs[1], &dev);
	if (!st)
		st = ring_drive(&seam, 1, bb, ring_ar_device, &d, RING_BACKSTOP_MS(timeout_ms));
	if (!st)
		ring_ar_device(&d);	/* the last reduction */
	seam.ops->stop(seam.engine, 1, bb);
	if (!st)
		st = ring_drive(&seam, 1, bb + 1, NULL, NULL, RING_BACKSTOP_MS(timeout_ms));
	seam.ops->stop(seam.engine, 1, bb + 1);
	if (st) {
		fprintf(stderr, "rank %u: all-reduce of %zu: %s: %s\n", p.r, size,
			nproxy_status_str(st), nproxy_net_strerror(net));
		bad = -(int)st;
	}
	if (!bad)
		bad = ring_ar_check(&p, salt);
	ring_ar_plan_free(&p, net);
	return bad;
}

/* A port that was free a moment ago on 127.0.0.1. */
static inline int ring_free_port(void)
{
	return nproxy_test_free_port();
}

/*
 * In a kselftest TEST: a fresh 127.0.0.1 root written into root (a char
 * array), then n forked ranks of fn(rank, arg), every one of which must
 * exit 0 within timeout_ms; the exit codes are logged when not.
 */
#define RING_ASSERT_RANKS_OK(n, fn, arg, root, timeout_ms)				\
	do {										\
		int exits_[n], port_ = ring_free_port();				\
											\
		ASSERT_GT(port_, 0);							\
		snprintf(root, sizeof(root), "127.0.0.1:%d", port_);			\
		ASSERT_EQ((int)(n), ring_fork_ranks(n, fn, arg, timeout_ms, exits_)) {	\
			for (uint32_t r_ = 0; r_ < (uint32_t)(n); r_++)			\
				TH_LOG("rank %u exit %d", r_, exits_[r_]);		\
		}									\
	} while (0)

struct ring_rank_call {
	int (*fn)(uint32_t rank, void *arg);
	void *arg;
};

static inline int ring_rank_call(uint32_t rank, uint32_t n, void *arg)
{
	struct ring_rank_call *call = arg;

	return call->fn(rank, call->arg);
}

/*
 * Run fn(rank, arg) in n forked children; wait up to timeout_ms for all of
 * them, SIGKILL what is left.  exits[r] gets each child's exit status (or
 * 128 + signal, or -1 when it had to be killed).  Returns how many exited 0.
 * Children leave with _exit() (libfabric's destructors stay in the parent)
 * and carry their own alarm past the deadline.
 */
static inline int ring_fork_ranks(uint32_t n, int (*fn)(uint32_t rank, void *arg), void *arg,
				  int timeout_ms, int *exits)
{
	struct ring_rank_call call = { .fn = fn, .arg = arg };
	struct nproxy_test_child how = {
		.quick_exit = true,
		.alarm_s = (unsigned int)(timeout_ms / 1000 + 5),
	};

	return nproxy_test_run_ranks(ring_rank_call, n, &call, (uint32_t)timeout_ms, &how, exits);
}

#endif
