// SPDX-License-Identifier: GPL-2.0
/*
 * The loopback network engine (tests and benchmarks only, seam_loopback.h):
 * ranks of one process exchange messages through per-(src, dst, stream)
 * FIFO channels under one fabric lock.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "seam_loopback.h"

#define LB_MAX_STREAMS	4

struct lb_msg {
	struct lb_msg *next;
	uint32_t len;
	unsigned char data[];
};

struct lb_channel {
	struct lb_msg *head, *tail;
};

struct lb_mr {
	unsigned char *base;
	size_t len;
};

struct lb_block {
	uint32_t stream, bb;
	struct nproxy_fifo_set fifos;
	struct nproxy_device_sems dev;
	uint32_t cursor;		/* next op to post */
	uint32_t n_completed;
	unsigned char *completed;	/* per op */
	struct lb_block *next;
};

struct nproxy_loopback {
	struct nproxy_loopback_fabric *fabric;
	uint32_t rank;
	struct lb_mr *mrs;
	uint32_t n_mrs;
	struct lb_block *blocks;
	enum nproxy_status fail_progress, fail_barrier;
	uint32_t stall_ticks;
	struct nproxy_loopback_counters c;
};

struct nproxy_loopback_fabric {
	pthread_mutex_t lock;
	uint32_t n_ranks;
	struct nproxy_loopback **engines;
	uint64_t *barrier_arrived;		/* per rank: highest seq arrived */
	struct lb_channel *channels;		/* [src][dst][stream] */
};

static struct lb_channel *channel(struct nproxy_loopback_fabric *f, uint32_t src, uint32_t dst,
				  uint32_t stream)
{
	return &f->channels[((size_t)src * f->n_ranks + dst) * LB_MAX_STREAMS + stream];
}

enum nproxy_status nproxy_loopback_fabric_create(uint32_t n_ranks,
						 struct nproxy_loopback_fabric **out)
{
	struct nproxy_loopback_fabric *f;

	if (!out || !n_ranks || n_ranks > 4096)
		return NPROXY_INVALID;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NPROXY_RESOURCE;
	f->n_ranks = n_ranks;
	f->engines = calloc(n_ranks, sizeof(*f->engines));
	f->barrier_arrived = calloc(n_ranks, sizeof(*f->barrier_arrived));
	f->channels = calloc((size_t)n_ranks * n_ranks * LB_MAX_STREAMS, sizeof(*f->channels));
	if (!f->engines || !f->barrier_arrived || !f->channels) {
		nproxy_loopback_fabric_destroy(f);
		return NPROXY_RESOURCE;
	}
	pthread_mutex_init(&f->lock, NULL);
	*out = f;
	return NPROXY_SUCCESS;
}

void nproxy_loopback_fabric_destroy(struct nproxy_loopback_fabric *f)
{
	size_t i;

	if (!f)
		return;
	if (f->channels) {
		for (i = 0; i < (size_t)f->n_ranks * f->n_ranks * LB_MAX_STREAMS; i++) {
			struct lb_msg *m = f->channels[i].head;

			while (m) {
				struct lb_msg *next = m->next;

				free(m);
				m = next;
			}
		}
	}
	free(f->channels);
	free(f->barrier_arrived);
	free(f->engines);
	if (f->n_ranks)
		pthread_mutex_destroy(&f->lock);
	free(f);
}

enum nproxy_status nproxy_loopback_create(struct nproxy_loopback_fabric *f, uint32_t rank,
					  struct nproxy_loopback **out)
{
	struct nproxy_loopback *lb;

	if (!f || !out || rank >= f->n_ranks)
		return NPROXY_INVALID;
	lb = calloc(1, sizeof(*lb));
	if (!lb)
		return NPROXY_RESOURCE;
	lb->fabric = f;
	lb->rank = rank;
	pthread_mutex_lock(&f->lock);
	if (f->engines[rank]) {
		pthread_mutex_unlock(&f->lock);
		free(lb);
		return NPROXY_BUSY;
	}
	f->engines[rank] = lb;
	pthread_mutex_unlock(&f->lock);
	*out = lb;
	return NPROXY_SUCCESS;
}

static void block_free(struct lb_block *b)
{
	free(b->completed);
	free(b);
}

void nproxy_loopback_destroy(struct nproxy_loopback *lb)
{
	struct nproxy_loopback_fabric *f;

	if (!lb)
		return;
	f = lb->fabric;
	pthread_mutex_lock(&f->lock);
	f->engines[lb->rank] = NULL;
	while (lb->blocks) {
		struct lb_block *b = lb->blocks;

		lb->blocks = b->next;
		block_free(b);
	}
	pthread_mutex_unlock(&f->lock);
	free(lb->mrs);
	free(lb);
}

enum nproxy_status nproxy_loopback_mr_register(struct nproxy_loopback *lb, void *base,
					       size_t len, uint32_t *mr)
{
	struct lb_mr *mrs;

	if (!lb || !base || !mr)
		return NPROXY_INVALID;
	pthread_mutex_lock(&lb->fabric->lock);
	mrs = realloc(lb->mrs, sizeof(*mrs) * (lb->n_mrs + 1));
	if (!mrs) {
		pthread_mutex_unlock(&lb->fabric->lock);
		return NPROXY_RESOURCE;
	}
	lb->mrs = mrs;
	mrs[lb->n_mrs].base = base;
	mrs[lb->n_mrs].len = len;
	*mr = lb->n_mrs++;
	pthread_mutex_unlock(&lb->fabric->lock);
	return NPROXY_SUCCESS;
}

/* Called with the fabric lock held. */
static unsigned char *resolve_addr(struct nproxy_loopback *lb, const struct nproxy_net_addr *a,
				   uint32_t len)
{
	if (a->reserved || a->mr >= lb->n_mrs || a->offset > lb->mrs[a->mr].len ||
	    len > lb->mrs[a->mr].len - a->offset)
		return NULL;
	return lb->mrs[a->mr].base + a->offset;
}

static enum nproxy_status validate_block(struct nproxy_loopback *lb,
					 const struct nproxy_fifo_set *fs,
					 const struct nproxy_device_sems *dev)
{
	uint32_t i;

	if (fs->reserved || (fs->n_ops && !fs->ops))
		return NPROXY_INVALID;
	for (i = 0; i < fs->n_ops; i++) {
		const struct nproxy_net_op *op = &fs->ops[i];
		const struct nproxy_net_addr *a;

		if (op->dtype || op->redop || (op->flags & ~(NPROXY_NET_OP_F_PRECOND | NPROXY_NET_OP_F_COMPLETE)) ||
		    op->peer >= lb->fabric->n_ranks)
			return NPROXY_INVALID;
		if (op->kind == NPROXY_NET_OP_SEND) {
			if (op->addr_idx >= fs->n_src || !fs->src)
				return NPROXY_INVALID;
			a = &fs->src[op->addr_idx];
		} else if (op->kind == NPROXY_NET_OP_RECV) {
			if (op->addr_idx >= fs->n_dst || !fs->dst)
				return NPROXY_INVALID;
			a = &fs->dst[op->addr_idx];
		} else {
			return NPROXY_INVALID;
		}
		if (!resolve_addr(lb, a, op->len))
			return NPROXY_INVALID;
		if ((op->flags & NPROXY_NET_OP_F_PRECOND) &&
		    (!dev || !dev->sems || op->pre_sem >= dev->n_sems))
			return NPROXY_INVALID;
		if ((op->flags & NPROXY_NET_OP_F_COMPLETE) &&
		    (!dev || !dev->sems || op->post_sem >= dev->n_sems))
			return NPROXY_INVALID;
	}
	return NPROXY_SUCCESS;
}

static struct lb_block **find_block(struct nproxy_loopback *lb, uint32_t stream, uint32_t bb)
{
	struct lb_block **pb;

	for (pb = &lb->blocks; *pb; pb = &(*pb)->next)
		if ((*pb)->stream == stream && (*pb)->bb == bb)
			break;
	return pb;
}

static enum nproxy_status lb_start(void *engine, uint32_t stream, uint32_t bb,
				   const struct nproxy_fifo_set *fifos,
				   const struct nproxy_device_sems *dev)
{
	struct nproxy_loopback *lb = engine;
	enum nproxy_status rc;
	struct lb_block *b;

	if (stream >= LB_MAX_STREAMS || !fifos)
		return NPROXY_INVALID;
	pthread_mutex_lock(&lb->fabric->lock);
	__atomic_add_fetch(&lb->c.starts, 1, __ATOMIC_RELAXED);
	rc = validate_block(lb, fifos, dev);
	if (rc == NPROXY_SUCCESS && *find_block(lb, stream, bb))
		rc = NPROXY_BUSY;
	if (rc != NPROXY_SUCCESS)
		goto out;
	b = calloc(1, sizeof(*b));
	if (b)
		b->completed = calloc(fifos->n_ops ? fifos->n_ops : 1, 1);
	if (!b || !b->completed) {
		free(b);
		rc = NPROXY_RESOURCE;
		goto out;
	}
	b->stream = stream;
	b->bb = bb;
	b->fifos = *fifos;
	if (dev)
		b->dev = *dev;
	b->next = lb->blocks;
	lb->blocks = b;
	__atomic_add_fetch(&lb->c.blocks_live, 1, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&lb->fabric->lock);
	return rc;
}

static void complete_op(struct nproxy_loopback *lb, struct lb_block *b, uint32_t i)
{
	const struct nproxy_net_op *op = &b->fifos.ops[i];

	b->completed[i] = 1;
	b->n_completed++;
	__atomic_add_fetch(&lb->c.ops_completed, 1, __ATOMIC_RELAXED);
	if (op->flags & NPROXY_NET_OP_F_COMPLETE)
		nproxy_device_sem_add(&b->dev, op->post_sem, op->post_inc);
}

/* Called with the fabric lock held: one tick of block b.  *moved set if anything happened. */
static enum nproxy_status block_tick(struct nproxy_loopback *lb, struct lb_block *b, bool *moved)
{
	struct nproxy_loopback_fabric *f = lb->fabric;
	uint32_t i;

	/* Post in FIFO order; a precondition holds back the rest of the block. */
	while (b->cursor < b->fifos.n_ops) {
		const struct nproxy_net_op *op = &b->fifos.ops[b->cursor];

		if ((op->flags & NPROXY_NET_OP_F_PRECOND) &&
		    nproxy_sem_load(&b->dev.sems[op->pre_sem]) < op->pre_value)
			break;
		if (op->kind == NPROXY_NET_OP_SEND) {
			struct lb_channel *ch = channel(f, lb->rank, op->peer, b->stream);
			struct lb_msg *m = malloc(sizeof(*m) + op->len);

			if (!m)
				return NPROXY_RESOURCE;
			m->next = NULL;
			m->len = op->len;
			memcpy(m->data, resolve_addr(lb, &b->fifos.src[op->addr_idx], op->len), op->len);
			if (ch->tail)
				ch->tail->next = m;
			else
				ch->head = m;
			ch->tail = m;
			complete_op(lb, b, b->cursor);	/* eager */
		}
		b->cursor++;
		*moved = true;
	}
	/* Match posted recvs, in order, against their channels. */
	for (i = 0; i < b->cursor; i++) {
		const struct nproxy_net_op *op = &b->fifos.ops[i];
		struct lb_channel *ch;
		struct lb_msg *m;

		if (b->completed[i] || op->kind != NPROXY_NET_OP_RECV)
			continue;
		ch = channel(f, op->peer, lb->rank, b->stream);
		m = ch->head;
		if (!m)
			continue;
		if (m->len > op->len) {
			nproxy_log(NPROXY_LOG_ERROR,
				   "loopback: rank %u stream %u bb %u op %u: message of %u bytes truncated to %u",
				   lb->rank, b->stream, b->bb, i, m->len, op->len);
			return NPROXY_NET_ERROR;
		}
		ch->head = m->next;
		if (!ch->head)
			ch->tail = NULL;
		memcpy(resolve_addr(lb, &b->fifos.dst[op->addr_idx], op->len), m->data, m->len);
		__atomic_add_fetch(&lb->c.bytes_received, m->len, __ATOMIC_RELAXED);
		free(m);
		complete_op(lb, b, i);
		*moved = true;
	}
	return NPROXY_SUCCESS;
}

static enum nproxy_status lb_progress(void *engine, uint32_t stream, uint32_t bb, bool *idle,
				      bool *block_done, bool *done)
{
	struct nproxy_loopback *lb = engine;
	enum nproxy_status rc = NPROXY_SUCCESS;
	struct lb_block *b, *it;
	bool moved = false;

	*idle = true;
	*block_done = *done = false;
	pthread_mutex_lock(&lb->fabric->lock);
	__atomic_add_fetch(&lb->c.progresses, 1, __ATOMIC_RELAXED);
	b = *find_block(lb, stream, bb);
	if (!b) {
		__atomic_add_fetch(&lb->c.misuse, 1, __ATOMIC_RELAXED);
		rc = NPROXY_INVALID;
		*done = true;
		goto out;
	}
	if (lb->fail_progress != NPROXY_SUCCESS) {
		rc = lb->fail_progress;
		lb->fail_progress = NPROXY_SUCCESS;
		*done = true;
		goto out;
	}
	if (lb->stall_ticks) {
		lb->stall_ticks--;
		goto out;
	}
	rc = block_tick(lb, b, &moved);
	if (rc != NPROXY_SUCCESS) {
		*done = true;
		goto out;
	}
	*idle = !moved;
	*block_done = b->n_completed == b->fifos.n_ops;
	*done = true;
	for (it = lb->blocks; it; it = it->next)
		if (it->stream == stream && it->n_completed != it->fifos.n_ops)
			*done = false;
out:
	pthread_mutex_unlock(&lb->fabric->lock);
	return rc;
}

static enum nproxy_status lb_stop(void *engine, uint32_t stream, uint32_t bb)
{
	struct nproxy_loopback *lb = engine;
	struct lb_block **pb, *b;
	enum nproxy_status rc = NPROXY_SUCCESS;

	pthread_mutex_lock(&lb->fabric->lock);
	__atomic_add_fetch(&lb->c.stops, 1, __ATOMIC_RELAXED);
	pb = find_block(lb, stream, bb);
	b = *pb;
	if (!b) {
		__atomic_add_fetch(&lb->c.misuse, 1, __ATOMIC_RELAXED);
		rc = NPROXY_INVALID;
	} else {
		*pb = b->next;
		block_free(b);
		__atomic_sub_fetch(&lb->c.blocks_live, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&lb->fabric->lock);
	return rc;
}

static const struct nproxy_seam_ops lb_seam_ops = {
	.name = "loopback",
	.start = lb_start,
	.progress = lb_progress,
	.stop = lb_stop,
};

struct nproxy_seam nproxy_loopback_seam(struct nproxy_loopback *lb)
{
	struct nproxy_seam s = { .ops = &lb_seam_ops, .engine = lb };

	return s;
}

static enum nproxy_status lb_barrier_take_fault(struct nproxy_loopback *lb)
{
	enum nproxy_status rc = lb->fail_barrier;

	lb->fail_barrier = NPROXY_SUCCESS;
	return rc;
}

static enum nproxy_status lb_barrier_arrive(void *ctx, uint64_t seq)
{
	struct nproxy_loopback *lb = ctx;
	enum nproxy_status rc;

	pthread_mutex_lock(&lb->fabric->lock);
	__atomic_add_fetch(&lb->c.barrier_arrives, 1, __ATOMIC_RELAXED);
	rc = lb_barrier_take_fault(lb);
	if (rc == NPROXY_SUCCESS && seq > lb->fabric->barrier_arrived[lb->rank])
		lb->fabric->barrier_arrived[lb->rank] = seq;
	pthread_mutex_unlock(&lb->fabric->lock);
	return rc;
}

static enum nproxy_status lb_barrier_test(void *ctx, uint64_t seq, bool *done)
{
	struct nproxy_loopback *lb = ctx;
	enum nproxy_status rc;
	uint32_t r;

	pthread_mutex_lock(&lb->fabric->lock);
	__atomic_add_fetch(&lb->c.barrier_tests, 1, __ATOMIC_RELAXED);
	rc = lb_barrier_take_fault(lb);
	*done = true;
	for (r = 0; r < lb->fabric->n_ranks; r++)
		if (lb->fabric->barrier_arrived[r] < seq)
			*done = false;
	pthread_mutex_unlock(&lb->fabric->lock);
	return rc;
}

static const struct nproxy_host_barrier_ops lb_barrier_ops = {
	.name = "loopback",
	.arrive = lb_barrier_arrive,
	.test = lb_barrier_test,
};

struct nproxy_host_barrier nproxy_loopback_barrier(struct nproxy_loopback *lb)
{
	struct nproxy_host_barrier b = { .ops = &lb_barrier_ops, .ctx = lb };

	return b;
}

void nproxy_loopback_fail_next_progress(struct nproxy_loopback *lb, enum nproxy_status st)
{
	pthread_mutex_lock(&lb->fabric->lock);
	lb->fail_progress = st;
	pthread_mutex_unlock(&lb->fabric->lock);
}

void nproxy_loopback_fail_next_barrier(struct nproxy_loopback *lb, enum nproxy_status st)
{
	pthread_mutex_lock(&lb->fabric->lock);
	lb->fail_barrier = st;
	pthread_mutex_unlock(&lb->fabric->lock);
}

void nproxy_loopback_stall(struct nproxy_loopback *lb, uint32_t ticks)
{
	pthread_mutex_lock(&lb->fabric->lock);
	lb->stall_ticks = ticks;
	pthread_mutex_unlock(&lb->fabric->lock);
}

void nproxy_loopback_counters(struct nproxy_loopback *lb, struct nproxy_loopback_counters *out)
{
	pthread_mutex_lock(&lb->fabric->lock);
	*out = lb->c;
	pthread_mutex_unlock(&lb->fabric->lock);
}
