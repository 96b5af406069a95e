// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The op engine behind the seam: start() validates a block's FIFO triple
 * and assigns every op its tag; progress() drains the CQ, posts eligible
 * ops and checks deadlines, never blocking; stop() retires a block.
 *
 * Matching: sender and receiver FIFOs differ, so the "op index" in a tag is
 * the op's position among the ops of its block between the same two ranks
 * in the same direction (k-th send from A to B in block bb matches the k-th
 * recv from A on B in bb).  With the comm id, stream, block and source rank
 * also in the tag, no two in-flight ops can match each other's messages.
 *
 * Posting order: ops are scanned in FIFO order, the sends first; an op that
 * cannot go yet (precondition not met, its (peer, direction) channel out
 * of credits) holds back the later ops of the same channel, so each channel
 * posts in FIFO order while a send waiting on the device does not hold back
 * the receives that feed it.  A post the provider refuses (-FI_EAGAIN)
 * holds back its channel the same way, for the tick.  A pass looks at
 * NET_SCAN_MAX_PER_TICK unposted ops at most, held ones included: a block
 * whose first receive comes after more than that many sends that are
 * held or refused (none of the built-in collectives) waits for some of
 * them to go out before that receive is posted.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "net_internal.h"

#define NET_POST_MAX_PER_TICK	64	/* bound on one tick's posting */
#define NET_STOP_REAP_MS	200	/* stop(): wait this long for cancellations */
#define NET_SCAN_MAX_PER_TICK	64	/* unposted ops looked at per tick */

static struct net_block *find_block(struct nproxy_net *net, uint32_t stream, uint32_t bb,
				    int *free_slot)
{
	if (free_slot)
		*free_slot = -1;
	for (int i = 0; i < NET_MAX_BLOCKS; i++) {
		struct net_block *b = net->blocks[i];

		if (b && b->stream == stream && b->bb == bb)
			return b;
		if (!b && free_slot && *free_slot < 0)
			*free_slot = i;
	}
	return NULL;
}

static const char *op_kind(const struct nproxy_net_op *op)
{
	return op->kind == NPROXY_NET_OP_SEND ? "send to" : "recv from";
}

static void block_release_mrs(struct nproxy_net *net, struct net_block *b)
{
	const struct nproxy_fifo_set *f = &b->fifos;

	for (uint32_t i = 0; i < f->n_src; i++)
		if (f->src[i].mr < net->n_mrs && net->mrs[f->src[i].mr].users)
			net->mrs[f->src[i].mr].users--;
	for (uint32_t i = 0; i < f->n_dst; i++)
		if (f->dst[i].mr < net->n_mrs && net->mrs[f->dst[i].mr].users)
			net->mrs[f->dst[i].mr].users--;
}

static enum nproxy_status check_addr(struct nproxy_net *net, const struct nproxy_net_addr *a,
				     const char *which, uint32_t i)
{
	if (a->reserved || a->mr >= net->n_mrs || !net->mrs[a->mr].refs) {
		npx_net_set_err(net, "%s[%u]: no memory region %u (or reserved != 0)", which, i, a->mr);
		return NPROXY_INVALID;
	}
	if (a->offset > net->mrs[a->mr].len) {
		npx_net_set_err(net, "%s[%u]: offset %" PRIu64 " past region %u (%zu bytes)", which, i,
			    a->offset, a->mr, net->mrs[a->mr].len);
		return NPROXY_INVALID;
	}
	return NPROXY_SUCCESS;
}

static bool sems_in_range(const struct nproxy_net_op *op, const struct nproxy_device_sems *dev)
{
	return !(((op->flags & NPROXY_NET_OP_F_PRECOND) && (!dev || op->pre_sem >= dev->n_sems)) ||
		 ((op->flags & NPROXY_NET_OP_F_COMPLETE) && (!dev || op->post_sem >= dev->n_sems)));
}

/*
 * A local op (REDUCE, COPY): both addresses in range, no peer; a REDUCE a
 * known type and operator over whole elements, a COPY neither.
 */
static enum nproxy_status validate_local(struct nproxy_net *net, uint32_t stream, uint32_t bb,
					 uint32_t i, const struct nproxy_fifo_set *f,
					 const struct nproxy_device_sems *dev)
{
	const struct nproxy_net_op *op = &f->ops[i];
	bool reduce = op->kind == NPROXY_NET_OP_REDUCE;
	size_t esize = nproxy_dtype_size((enum nproxy_dtype)op->dtype);
	const struct nproxy_net_addr *src, *dst;
	bool typed = reduce ? esize && op->redop < NPROXY_REDOP_COUNT && !(op->len % esize) :
			      !op->dtype && !op->redop;

	if (op->peer || !typed ||
	    (op->flags & ~(NPROXY_NET_OP_F_PRECOND | NPROXY_NET_OP_F_COMPLETE)) ||
	    op->addr_idx >= f->n_src || op->addr_idx >= f->n_dst || !sems_in_range(op, dev)) {
		npx_net_set_err(net,
			    "stream %u bb %u op %u: bad %s (peer %u, dtype %u, redop %u, len %u, addr %u, flags %#x)",
			    stream, bb, i, reduce ? "REDUCE" : "COPY", op->peer, op->dtype, op->redop, op->len,
			    op->addr_idx, op->flags);
		return NPROXY_INVALID;
	}
	src = &f->src[op->addr_idx];
	dst = &f->dst[op->addr_idx];
	if (src->offset + op->len > net->mrs[src->mr].len ||
	    dst->offset + op->len > net->mrs[dst->mr].len) {
		npx_net_set_err(net, "stream %u bb %u op %u: %s of %u bytes overruns its regions",
			    stream, bb, i, reduce ? "REDUCE" : "COPY", op->len);
		return NPROXY_INVALID;
	}
	return NPROXY_SUCCESS;
}

static enum nproxy_status validate(struct nproxy_net *net, uint32_t stream, uint32_t bb,
				   const struct nproxy_fifo_set *f,
				   const struct nproxy_device_sems *dev)
{
	uint64_t max_msg = net->info->ep_attr->max_msg_size;
	enum nproxy_status st;

	if (f->reserved || (f->n_ops && !f->ops) || (f->n_src && !f->src) || (f->n_dst && !f->dst)) {
		npx_net_set_err(net, "stream %u bb %u: malformed FIFO set", stream, bb);
		return NPROXY_INVALID;
	}
	for (uint32_t i = 0; i < f->n_src; i++)
		if ((st = check_addr(net, &f->src[i], "src", i)) != NPROXY_SUCCESS)
			return st;
	for (uint32_t i = 0; i < f->n_dst; i++)
		if ((st = check_addr(net, &f->dst[i], "dst", i)) != NPROXY_SUCCESS)
			return st;
	for (uint32_t i = 0; i < f->n_ops; i++) {
		const struct nproxy_net_op *op = &f->ops[i];
		bool send = op->kind == NPROXY_NET_OP_SEND;
		const struct nproxy_net_addr *a;
		uint32_t n_addr = send ? f->n_src : f->n_dst;

		if (op->kind == NPROXY_NET_OP_REDUCE || op->kind == NPROXY_NET_OP_COPY) {
			st = validate_local(net, stream, bb, i, f, dev);
			if (st != NPROXY_SUCCESS)
				return st;
			continue;
		}
		if ((op->kind != NPROXY_NET_OP_SEND && op->kind != NPROXY_NET_OP_RECV) ||
		    op->dtype || op->redop ||
		    (op->flags & ~(NPROXY_NET_OP_F_PRECOND | NPROXY_NET_OP_F_COMPLETE))) {
			npx_net_set_err(net, "stream %u bb %u op %u: bad kind %u / flags %#x / dtype, redop not 0",
				    stream, bb, i, op->kind, op->flags);
			return NPROXY_INVALID;
		}
		if (op->peer >= net->n_ranks || op->addr_idx >= n_addr || op->len > max_msg) {
			npx_net_set_err(net,
				    "stream %u bb %u op %u: peer %u of %u, addr %u of %u, len %u (max %" PRIu64 ")",
				    stream, bb, i, op->peer, net->n_ranks, op->addr_idx, n_addr,
				    op->len, max_msg);
			return NPROXY_INVALID;
		}
		a = send ? &f->src[op->addr_idx] : &f->dst[op->addr_idx];
		if (a->offset + op->len > net->mrs[a->mr].len) {
			npx_net_set_err(net, "stream %u bb %u op %u: %u bytes at offset %" PRIu64
				    " overrun region %u (%zu bytes)", stream, bb, i, op->len,
				    a->offset, a->mr, net->mrs[a->mr].len);
			return NPROXY_INVALID;
		}
		if (!sems_in_range(op, dev)) {
			npx_net_set_err(net, "stream %u bb %u op %u: semaphore %u/%u out of range (%u sems)",
				    stream, bb, i, op->pre_sem, op->post_sem, dev ? dev->n_sems : 0);
			return NPROXY_INVALID;
		}
	}
	return NPROXY_SUCCESS;
}

/*
 * Every op of block b its request and tag: seq[peer * 2 + is_send] counts
 * the ops between this rank and peer in that direction (the op index of
 * the tag), the same on both sides.
 */
static enum nproxy_status assign_tags(struct nproxy_net *net, struct net_block *b, uint32_t *seq,
				      uint32_t tag_block)
{
	const struct nproxy_fifo_set *fifos = &b->fifos;

	for (uint32_t i = 0; i < fifos->n_ops; i++) {
		const struct nproxy_net_op *op = &fifos->ops[i];
		struct net_op_state *s = &b->st[i];
		bool send = op->kind == NPROXY_NET_OP_SEND;
		uint32_t *k = &seq[op->peer * 2 + send];

		if (op->kind == NPROXY_NET_OP_REDUCE || op->kind == NPROXY_NET_OP_COPY) {
			/* No message, no tag: run in place by the posting pass. */
			s->req.kind = NET_REQ_OP;
			s->req.peer = net->rank;
			s->blk = b;
			s->idx = i;
			s->local = 1;
			continue;
		}
		if (*k > NET_TAG_MAX_SEQ) {
			npx_net_set_err(net, "stream %u bb %u: over %u ops with peer %u in one block",
				    b->stream, b->bb, NET_TAG_MAX_SEQ + 1, op->peer);
			return NPROXY_INVALID;
		}
		s->req.kind = NET_REQ_OP;
		s->req.is_send = send;
		s->req.peer = op->peer;
		s->blk = b;
		s->idx = i;
		s->seq = (*k)++;
		/* The source rank in the tag is the sender's. */
		s->tag = net_tag(0, net->comm_id, b->stream, tag_block, send ? net->rank : op->peer,
				 s->seq);
	}
	return NPROXY_SUCCESS;
}

/*
 * Chain the completing ops of each semaphore in FIFO order (sem_head,
 * next_same_sem), so their increments reach the device in that order;
 * tail is n_sems scratch counters.
 */
static void chain_sems(struct net_block *b, uint32_t *tail)
{
	const struct nproxy_fifo_set *fifos = &b->fifos;

	for (uint32_t s = 0; s < b->dev.n_sems; s++)
		b->sem_head[s] = tail[s] = NET_NONE;
	for (uint32_t i = 0; i < fifos->n_ops; i++) {
		const struct nproxy_net_op *op = &fifos->ops[i];

		b->next_same_sem[i] = NET_NONE;
		if (!(op->flags & NPROXY_NET_OP_F_COMPLETE))
			continue;
		if (tail[op->post_sem] == NET_NONE)
			b->sem_head[op->post_sem] = i;
		else
			b->next_same_sem[tail[op->post_sem]] = i;
		tail[op->post_sem] = i;
	}
}

static enum nproxy_status net_start(void *engine, uint32_t stream, uint32_t bb,
				    const struct nproxy_fifo_set *fifos,
				    const struct nproxy_device_sems *dev)
{
	struct nproxy_net *net = engine;
	enum nproxy_status st;
	struct net_block *b = NULL;
	uint32_t *seq = NULL, tag_block;
	int slot;

	if (!net || !fifos || stream >= NPROXY_MAX_STREAMS)
		return NPROXY_INVALID;
	pthread_mutex_lock(&net->lock);
	if (find_block(net, stream, bb, &slot)) {
		npx_net_set_err(net, "stream %u bb %u started twice", stream, bb);
		st = NPROXY_BUSY;
		goto out;
	}
	if (slot < 0) {
		npx_net_set_err(net, "stream %u bb %u: %d blocks already started", stream, bb,
			    NET_MAX_BLOCKS);
		st = NPROXY_RESOURCE;
		goto out;
	}
	st = validate(net, stream, bb, fifos, dev);
	if (st != NPROXY_SUCCESS)
		goto out;
	st = NPROXY_RESOURCE;
	b = npx_net_block_get(net, fifos->n_ops, dev ? dev->n_sems : 0);
	seq = npx_net_start_scratch(net, 2 * net->n_ranks + (dev ? dev->n_sems : 0));
	if (!b || !seq)
		goto out;
	memset(seq, 0, 2 * (size_t)net->n_ranks * sizeof(*seq));
	b->stream = stream;
	b->bb = bb;
	/* Same count on every rank: they start the same blocks in the same order. */
	tag_block = ((uint32_t)net->epoch[stream][bb & 0xff] << 8) | (bb & 0xff);
	b->fifos = *fifos;
	if (dev)
		b->dev = *dev;
	st = assign_tags(net, b, seq, tag_block);
	if (st != NPROXY_SUCCESS)
		goto out;
	if (b->dev.n_sems)
		chain_sems(b, seq + 2 * net->n_ranks);
	for (uint32_t i = 0; i < fifos->n_src; i++)
		net->mrs[fifos->src[i].mr].users++;
	for (uint32_t i = 0; i < fifos->n_dst; i++)
		net->mrs[fifos->dst[i].mr].users++;
	net->blocks[slot] = b;
	net->epoch[stream][bb & 0xff]++;
	b = NULL;
	st = NPROXY_SUCCESS;
out:
	if (b)
		npx_net_block_free(net, b);
	pthread_mutex_unlock(&net->lock);
	return st;
}

/*
 * A local op whose precondition holds: the device's compute step (REDUCE)
 * or its DMA (COPY), done here.  A REDUCE runs NET_REDUCE_SLICE bytes a
 * tick: between slices the tick's CQ drain moves the provider's transfers
 * on.  Whole, a 512 KiB reduction held shm's SAR protocol still for its
 * length: this rank's send to the peer, whose completion needs this
 * rank's progress, finished only after it, and the next send to that peer
 * was refused until then (2 ranks, 1 MiB allreduce: 1.09-1.26x Open MPI
 * whole, 0.94-1.16x in 64 KiB slices; 4 MiB: 0.94-1.31x against
 * 0.78-1.10x).  Returns whether the op is done.
 */
static bool run_local(struct nproxy_net *net, struct net_block *b, struct net_op_state *s)
{
	const struct nproxy_fifo_set *f = &b->fifos;
	const struct nproxy_net_op *op = &f->ops[s->idx];
	const struct nproxy_net_addr *src = &f->src[op->addr_idx], *dst = &f->dst[op->addr_idx];
	char *to = (char *)net->mrs[dst->mr].base + dst->offset;
	const char *from = (const char *)net->mrs[src->mr].base + src->offset;
	size_t esize;
	uint32_t n;

	/* Validated at start(): the type, operator and ranges are good. */
	if (op->kind == NPROXY_NET_OP_COPY) {
		memmove(to, from, op->len);
	} else {
		esize = nproxy_dtype_size((enum nproxy_dtype)op->dtype);
		n = op->len - s->local_done;
		if (n > NET_REDUCE_SLICE)
			n = NET_REDUCE_SLICE;	/* a multiple of every element size */
		nproxy_reduce(to + s->local_done, from + s->local_done, n / esize,
			      (enum nproxy_dtype)op->dtype, (enum nproxy_redop)op->redop);
		s->local_done += n;
		if (s->local_done < op->len)
			return false;
	}
	npx_net_local_op_done(net, s);
	return true;
}

/* Hand op i of block b (a SEND or RECV) to the provider. */
static ssize_t post_op(struct nproxy_net *net, struct net_block *b, uint32_t i)
{
	const struct nproxy_fifo_set *f = &b->fifos;
	const struct nproxy_net_op *op = &f->ops[i];
	struct net_op_state *s = &b->st[i];
	const struct nproxy_net_addr *a = s->req.is_send ? &f->src[op->addr_idx] :
							   &f->dst[op->addr_idx];
	struct net_mr *m = &net->mrs[a->mr];

	if (s->req.is_send)
		return fi_tsend(net->ep, (char *)m->base + a->offset, op->len, m->desc,
				net->peers[op->peer], s->tag, &s->req.ctx);
	return fi_trecv(net->ep, (char *)m->base + a->offset, op->len, m->desc,
			FI_ADDR_UNSPEC, s->tag, 0, &s->req.ctx);
}

/*
 * The provider refused op i (-FI_EAGAIN: its queue is full, or shm has
 * one large send to that peer in flight).  Only the op's channel waits for
 * the next tick: ending the pass here would leave this rank's receives
 * unposted, and a peer refused the same way would wait on them for ever.
 * The refusal clock (check_deadlines()) is the tick's first refused op's;
 * another op refused first (the next of a stream of large sends to one
 * peer, after the last went out) starts it anew.
 */
static void refused(struct nproxy_net *net, struct net_block *b, uint32_t i, bool *again)
{
	if (!*again) {
		if (!b->eagain_since_ms || b->eagain_op != i)
			b->eagain_since_ms = npx_net_pass_ms(net);
		b->eagain_op = i;
	}
	*again = true;
}

/*
 * One posting pass over block b.  The sends pass looks at sends only and
 * leaves first_unposted alone; the full pass looks at everything left.
 * Sets *again when the provider refused a post (-FI_EAGAIN): that op's
 * channel waits for the next tick, the pass goes on with the others.
 */
static enum nproxy_status post_pass(struct nproxy_net *net, struct net_block *b, uint32_t scan,
				    bool sends_only, uint32_t *posted, bool *again)
{
	const struct nproxy_fifo_set *f = &b->fifos;
	bool contiguous = !sends_only, local_held = false;
	uint32_t scanned = 0;	/* per pass: held-back sends must not starve the receives */

	for (uint32_t i = b->first_unposted; i < f->n_ops; i++) {
		const struct nproxy_net_op *op = &f->ops[i];
		struct net_op_state *s = &b->st[i];
		uint32_t ch = s->req.peer * 2 + s->req.is_send;
		ssize_t rc;

		if (s->req.posted || s->req.done) {
			if (contiguous)
				b->first_unposted = i + 1;
			continue;
		}
		contiguous = false;
		/* Receives count against the sends pass's budget too: bounded work. */
		if (++scanned > NET_SCAN_MAX_PER_TICK || *posted >= NET_POST_MAX_PER_TICK)
			break;
		if (sends_only && !s->req.is_send)
			continue;
		if (s->local) {
			/* In FIFO order among themselves, once their precondition holds. */
			/* A REDUCE under way passed its precondition already. */
			if (local_held || (!s->local_done && (op->flags & NPROXY_NET_OP_F_PRECOND) &&
					   nproxy_sem_load(&b->dev.sems[op->pre_sem]) < op->pre_value)) {
				local_held = true;
				continue;
			}
			/* A REDUCE cut short holds the later ones: FIFO. */
			local_held = !run_local(net, b, s);
			++*posted;
			continue;
		}
		if (net->chan_stamp[ch] == scan)
			continue;
		if (net->inflight[ch] >= net->credits ||
		    ((op->flags & NPROXY_NET_OP_F_PRECOND) &&
		     nproxy_sem_load(&b->dev.sems[op->pre_sem]) < op->pre_value)) {
			net->chan_stamp[ch] = scan;	/* keep this channel in order */
			continue;
		}
		rc = post_op(net, b, i);
		if (rc == -FI_EAGAIN) {
			refused(net, b, i, again);
			net->chan_stamp[ch] = scan;	/* the channel waits, the others go on */
			continue;
		}
		if (rc) {
			npx_net_set_err(net, "stream %u bb %u op %u: %s rank %u (%u bytes): %s",
				    b->stream, b->bb, i, op_kind(op), op->peer, op->len,
				    fi_strerror((int)-rc));
			return npx_net_fail(net, NPROXY_NET_ERROR);
		}
		s->req.posted = 1;
		s->posted_ms = npx_net_pass_ms(net);
		net->inflight[ch]++;
		b->n_inflight++;
		++*posted;
	}
	return NPROXY_SUCCESS;
}

/*
 * Post eligible ops of block b; see the top of the file for the order.
 * Sends go first: a provider may do a receive's whole copy inside
 * fi_trecv() when the peer's message is already there (shm's CMA protocol
 * does), and a send posted after that would reach the peer one copy late
 * -- which made a 2-rank 1 MiB allgather wait for two copies in a row.
 */
static enum nproxy_status post_block(struct nproxy_net *net, struct net_block *b,
				     uint32_t *moved)
{
	uint32_t posted = 0;
	uint32_t scan = ++net->scan;
	enum nproxy_status st;
	bool again = false;

	if (scan == 0)	/* wrapped: stale stamps might look current */
		scan = net->scan = 1, memset(net->chan_stamp, 0, 2 * net->n_ranks * sizeof(uint32_t));
	st = post_pass(net, b, scan, true, &posted, &again);
	if (st == NPROXY_SUCCESS)
		st = post_pass(net, b, scan, false, &posted, &again);
	if (st != NPROXY_SUCCESS)
		return st;
	*moved += posted;
	if (again)
		return npx_net_drain_cq(net, moved);
	if (posted && b->eagain_since_ms) {
		b->eagain_since_ms = 0;
		b->refusal_end_ms = npx_net_pass_ms(net);	/* the ops' clocks start over */
	}
	return NPROXY_SUCCESS;
}

/*
 * An op that saw no completion from its peer for timeout_ms is declared
 * failed: a dead peer or a broken link must end the task, not hang it.
 * A peer not heard from since the open, and every peer while the first
 * host barrier is in flight, gets the open's deadline
 * (npx_net_peer_limit_ms()): a rank may still be setting up for its
 * first op.  Posts refused to a peer that already completed a send from
 * this rank are on the ops' deadline (npx_net_refused_limit_ms()).
 * Run only on idle ticks, at most once per millisecond.
 */
static enum nproxy_status check_deadlines(struct nproxy_net *net, struct net_block *b)
{
	int64_t now = npx_net_pass_ms(net);
	int limit;

	if (now == net->last_deadline_check_ms)
		return NPROXY_SUCCESS;
	net->last_deadline_check_ms = now;
	limit = b->eagain_since_ms ? npx_net_refused_limit_ms(net, b->fifos.ops[b->eagain_op].peer) :
				     0;
	if (b->eagain_since_ms && now - b->eagain_since_ms > limit) {
		const struct nproxy_net_op *op = &b->fifos.ops[b->eagain_op];
		char host[64];

		npx_net_peer_host(net, op->peer, host, sizeof(host));
		npx_net_set_err(net, "stream %u bb %u op %u: %s rank %u (%u bytes): provider refused the post (-FI_EAGAIN) for %d ms: peer dead or unreachable (host %s)",
			    b->stream, b->bb, b->eagain_op, op_kind(op), op->peer, op->len,
			    limit, host);
		return npx_net_fail(net, NPROXY_TIMEOUT);
	}
	/*
	 * While a post is refused, its clock is the block's: the ops posted
	 * past it may wait on that peer through others (a ring's receive
	 * from a rank that waits for the late one), and a peer still setting
	 * up has the open's deadline, not the ops'.  When the refusal ends
	 * their clocks start from then (refusal_end_ms), as if posted then.
	 */
	if (b->eagain_since_ms || !b->n_inflight)
		return NPROXY_SUCCESS;
	/*
	 * Only the posted ops, from the first that is not done: a scan of the
	 * whole block once a millisecond made a block of 10^5 ops spend its
	 * idle ticks here (a 400k-op ping-pong never finished).
	 */
	while (b->first_undone < b->fifos.n_ops && b->st[b->first_undone].req.done)
		b->first_undone++;
	for (uint32_t i = b->first_undone, seen = 0; i < b->fifos.n_ops && seen < b->n_inflight;
	     i++) {
		struct net_op_state *s = &b->st[i];
		int64_t since;

		if (!s->req.posted)
			continue;
		seen++;
		since = s->posted_ms > b->refusal_end_ms ? s->posted_ms : b->refusal_end_ms;
		if (net->last_activity_ms[s->req.peer] > since)
			since = net->last_activity_ms[s->req.peer];
		limit = npx_net_peer_limit_ms(net, s->req.peer);
		if (now - since > limit) {
			const struct nproxy_net_op *op = &b->fifos.ops[i];
			char host[64];

			npx_net_peer_host(net, op->peer, host, sizeof(host));
			npx_net_set_err(net,
				    "stream %u bb %u op %u: %s rank %u (%u bytes) made no progress for %d ms: peer dead or unreachable (host %s)",
				    b->stream, b->bb, i, op_kind(op), op->peer, op->len,
				    limit, host);
			return npx_net_fail(net, NPROXY_TIMEOUT);
		}
	}
	return NPROXY_SUCCESS;
}

static bool stream_done(struct nproxy_net *net, uint32_t stream)
{
	for (int i = 0; i < NET_MAX_BLOCKS; i++) {
		struct net_block *b = net->blocks[i];

		if (b && b->stream == stream && b->n_done < b->fifos.n_ops)
			return false;
	}
	return true;
}

static enum nproxy_status net_progress(void *engine, uint32_t stream, uint32_t bb, bool *idle,
				       bool *block_done, bool *done)
{
	struct nproxy_net *net = engine;
	enum nproxy_status st;
	struct net_block *b;
	uint32_t moved = 0;

	*idle = false;
	*block_done = false;
	*done = false;
	pthread_mutex_lock(&net->lock);
	b = find_block(net, stream, bb, NULL);
	if (!b) {
		npx_net_set_err(net, "progress: stream %u bb %u was not started", stream, bb);
		*done = true;
		st = NPROXY_INVALID;
		goto out;
	}
	st = net->failed;
	if (st == NPROXY_SUCCESS)
		st = npx_net_drain_cq(net, &moved);
	if (st == NPROXY_SUCCESS)
		st = post_block(net, b, &moved);
	if (st == NPROXY_SUCCESS && !moved)
		st = check_deadlines(net, b);
	if (st != NPROXY_SUCCESS) {
		*done = true;
		goto out;
	}
	*idle = !moved;
	*block_done = b->n_done == b->fifos.n_ops;
	*done = *block_done && stream_done(net, stream);
out:
	pthread_mutex_unlock(&net->lock);
	return st;
}

static bool in_graveyard(struct nproxy_net *net, struct net_block *b)
{
	for (struct net_block *g = net->graveyard; g; g = g->next_grave)
		if (g == b)
			return true;
	return false;
}

static enum nproxy_status net_stop(void *engine, uint32_t stream, uint32_t bb)
{
	struct nproxy_net *net = engine;
	struct net_block *b = NULL;
	int slot = -1;

	pthread_mutex_lock(&net->lock);
	for (int i = 0; i < NET_MAX_BLOCKS; i++)
		if (net->blocks[i] && net->blocks[i]->stream == stream && net->blocks[i]->bb == bb)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&net->lock);
		return NPROXY_INVALID;
	}
	b = net->blocks[slot];
	net->blocks[slot] = NULL;
	block_release_mrs(net, b);
	if (b->n_inflight) {
		/*
		 * Aborting with ops in the provider: cancel them, and keep the
		 * requests alive until the cancellations are reaped (or the
		 * endpoint is closed) -- the provider still owns their context.
		 */
		for (uint32_t i = 0; i < b->fifos.n_ops; i++)
			if (b->st[i].req.posted)
				fi_cancel(&net->ep->fid, &b->st[i].req.ctx);
		b->retired = true;
		memset(&b->fifos, 0, sizeof(b->fifos));
		b->next_grave = net->graveyard;
		net->graveyard = b;
		/*
		 * Reap the cancellations for a bounded time, so that after
		 * stop() no posted recv still writes into the caller's buffer
		 * (providers cancel posted recvs promptly; a send they cannot
		 * cancel only reads).
		 */
		for (int64_t end = npx_now_ms() + NET_STOP_REAP_MS; in_graveyard(net, b) &&
		     npx_now_ms() < end;) {
			uint32_t moved = 0;

			npx_net_drain_cq(net, &moved);
			if (!moved)
				sched_yield();
		}
		if (in_graveyard(net, b))
			nproxy_log(NPROXY_LOG_WARN,
				   "net rank %u: stream %u bb %u stopped with %u op(s) still in the provider",
				   net->rank, stream, bb, b->n_inflight);
	} else {
		npx_net_block_free(net, b);
	}
	pthread_mutex_unlock(&net->lock);
	return NPROXY_SUCCESS;
}

void npx_net_engine_close(struct nproxy_net *net)
{
	for (int i = 0; i < NET_MAX_BLOCKS; i++) {
		if (net->blocks[i]) {
			struct net_block *b = net->blocks[i];

			net_stop(net, b->stream, b->bb);
		}
	}
}

const struct nproxy_seam_ops npx_net_seam_ops = {
	.name = "libfabric",
	.start = net_start,
	.progress = net_progress,
	.stop = net_stop,
};

/* nproxy_net_abort() waits this long for its sends: its caller may exit next. */
#define ABORT_FLUSH_MS	500

NPROXY_API void nproxy_net_abort(struct nproxy_net *net, uint32_t dead_rank, int dead_pid,
				 const char *why)
{
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 200000 };
	int64_t until;
	uint32_t moved = 0;

	if (!net)
		return;
	pthread_mutex_lock(&net->lock);
	npx_net_abort_locked(net, dead_rank, dead_pid, why);
	until = npx_now_ms() + ABORT_FLUSH_MS;
	while (npx_net_abort_sending(net) && npx_now_ms() < until) {
		npx_net_drain_cq(net, &moved);
		npx_net_abort_repost(net);
		pthread_mutex_unlock(&net->lock);
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&net->lock);
	}
	pthread_mutex_unlock(&net->lock);
}

NPROXY_API enum nproxy_status nproxy_net_poll(struct nproxy_net *net)
{
	enum nproxy_status st;
	uint32_t moved = 0;

	if (!net)
		return NPROXY_INVALID;
	/*
	 * Another thread inside the engine drives it, or is stuck inside the
	 * provider (a dead peer's shm lock, nproxy_net_shm_break_dead_locks):
	 * either way this caller must not wait for it.
	 */
	if (pthread_mutex_trylock(&net->lock))
		return NPROXY_SUCCESS;
	npx_net_drain_cq(net, &moved);
	npx_net_abort_repost(net);
	st = net->failed;
	pthread_mutex_unlock(&net->lock);
	return st;
}
