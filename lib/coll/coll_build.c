// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The built-in collectives as one basic block of ring ops each.
 *
 * One block, not one per ring step: the engine posts a block's receives
 * ahead (up to its credits) while each send waits, on its precondition,
 * for the data it forwards; a block per step would post a step's receive
 * only after the previous step drained.  Two semaphores carry the whole
 * op, with thresholds counted from their values at the start:
 *
 *   RECV   every receive adds 1 (COLL_SEM_RECV), in FIFO order
 *   REDUCE every reduction adds 1 (COLL_SEM_REDUCE)
 *
 * Allgather, rank r of W, step s = 0..W-2: send part (r - s) to r + 1,
 * receive part (r - s - 1) from r - 1; the send of step s > 0 waits for
 * the receive of step s - 1 (RECV >= s).
 *
 * Allreduce: the count elements in W chunks.  Reduce-scatter step s: send
 * chunk (r - s) (s > 0: after the reduction of step s - 1, REDUCE >= s),
 * receive chunk (r - s - 1) into scratch slot s, reduce the slot into the
 * chunk once it arrived (RECV >= s + 1).  After W - 1 steps rank r holds
 * chunk (r + 1) whole; the allgather phase passes the whole chunks round,
 * its first send after the last reduction (REDUCE >= W - 1).  A receive of
 * the allgather phase that is posted early lands in a chunk only after the
 * owner's sum, which includes what this rank last sent from that chunk,
 * was made: the ring's order keeps the pre-posted receives safe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/net.h>
#include "coll_internal.h"

static bool grow_ops(struct nproxy_coll *c, uint32_t n)
{
	struct nproxy_net_op *ops;
	struct nproxy_net_addr *src, *dst;

	if (n <= c->cap_ops)
		return true;
	ops = realloc(c->ops, n * sizeof(*ops));
	if (!ops)
		return false;
	c->ops = ops;
	src = realloc(c->src, n * sizeof(*src));
	if (!src)
		return false;
	c->src = src;
	dst = realloc(c->dst, n * sizeof(*dst));
	if (!dst)
		return false;
	c->dst = dst;
	c->cap_ops = n;
	return true;
}

/*
 * Where each chunk of a W-way split of count elements starts and ends, and
 * the pieces a chunk moves in: a piece is forwarded (or reduced) as soon
 * as it is there, so the next rank copies piece p while this one reduces
 * piece p + 1, instead of every step waiting for a whole chunk.
 */
struct split {
	uint64_t per;		/* elements per chunk (the last may be short) */
	uint64_t count;
	size_t esize;
	uint32_t pieces;	/* per chunk, >= 1 */
	uint64_t per_piece;	/* elements per piece (the last may be short) */
};

/* Byte offset of piece p of chunk c (p == pieces: the chunk's end). */
static uint64_t piece_off(const struct split *sp, uint32_t c, uint32_t p)
{
	uint64_t in = (uint64_t)p * sp->per_piece;
	uint64_t e = (uint64_t)c * sp->per + (in < sp->per ? in : sp->per);

	return (e < sp->count ? e : sp->count) * sp->esize;
}

static uint32_t piece_len(const struct split *sp, uint32_t c, uint32_t p)
{
	return (uint32_t)(piece_off(sp, c, p + 1) - piece_off(sp, c, p));
}

/*
 * Pieces per chunk: about COLL_PIECE_BYTES each, at most max_pieces.
 * Below two pieces' worth a chunk moves whole: each piece costs its own
 * messages and completions, which small ops cannot pay back.
 */
static void split_pieces(struct split *sp, uint32_t max_pieces)
{
	uint64_t p = sp->per * sp->esize / COLL_PIECE_BYTES;

	if (p > max_pieces)
		p = max_pieces;
	sp->pieces = p > 1 ? (uint32_t)p : 1;
	sp->per_piece = (sp->per + sp->pieces - 1) / sp->pieces;
}

struct builder {
	struct nproxy_coll *c;
	uint32_t n;
	uint32_t next, prev;
};

static struct nproxy_net_op *add(struct builder *b, uint8_t kind, uint32_t peer, uint32_t len,
				 struct nproxy_net_addr src, struct nproxy_net_addr dst)
{
	struct nproxy_net_op *op = &b->c->ops[b->n];

	*op = (struct nproxy_net_op){ .kind = kind, .peer = peer, .addr_idx = b->n, .len = len };
	b->c->src[b->n] = src;
	b->c->dst[b->n] = dst;
	b->n++;
	return op;
}

static void gate(struct nproxy_net_op *op, uint16_t sem, uint64_t value)
{
	op->flags |= NPROXY_NET_OP_F_PRECOND;
	op->pre_sem = sem;
	op->pre_value = value;
}

static void announce(struct nproxy_net_op *op, uint16_t sem)
{
	op->flags |= NPROXY_NET_OP_F_COMPLETE;
	op->post_sem = sem;
	op->post_inc = 1;
}

static struct nproxy_net_addr at(uint32_t mr, uint64_t off)
{
	return (struct nproxy_net_addr){ .mr = mr, .offset = off };
}

static void build_allgather(struct builder *b, uint32_t mr, const struct split *sp,
			    uint64_t recv_base)
{
	uint32_t W = b->c->n_ranks, r = b->c->me, P = sp->pieces;

	for (uint32_t s = 0; s + 1 < W; s++) {
		uint32_t send_idx = (r + W - s) % W, recv_idx = (r + 2 * W - s - 1) % W;

		for (uint32_t p = 0; p < P; p++) {
			struct nproxy_net_op *op;

			op = add(b, NPROXY_NET_OP_SEND, b->next, piece_len(sp, send_idx, p),
				 at(mr, piece_off(sp, send_idx, p)), at(mr, 0));
			/* Forward piece p once it arrived in the step before. */
			if (s)
				gate(op, COLL_SEM_RECV, recv_base + (uint64_t)(s - 1) * P + p + 1);
			op = add(b, NPROXY_NET_OP_RECV, b->prev, piece_len(sp, recv_idx, p),
				 at(mr, 0), at(mr, piece_off(sp, recv_idx, p)));
			announce(op, COLL_SEM_RECV);
		}
	}
}

/* Reduce-scatter: W - 1 steps, each piece reduced as soon as it is in. */
static void build_reduce_scatter(struct builder *b, uint32_t mr, const struct split *sp,
				 const struct nproxy_coll_desc *d, uint64_t recv_base,
				 uint64_t reduce_base)
{
	struct nproxy_coll *c = b->c;
	uint32_t W = c->n_ranks, r = c->me, P = sp->pieces;
	uint64_t slot = (uint64_t)sp->per * sp->esize;
	struct nproxy_net_op *op;

	for (uint32_t s = 0; s + 1 < W; s++) {
		uint32_t send_idx = (r + W - s) % W, recv_idx = (r + 2 * W - s - 1) % W;

		for (uint32_t p = 0; p < P; p++) {
			uint64_t in_slot = piece_off(sp, recv_idx, p) - piece_off(sp, recv_idx, 0);
			uint64_t k = (uint64_t)s * P + p;	/* this piece's RECV and REDUCE number */

			op = add(b, NPROXY_NET_OP_SEND, b->next, piece_len(sp, send_idx, p),
				 at(mr, piece_off(sp, send_idx, p)), at(mr, 0));
			/* Piece p of the chunk this rank reduced in the step before. */
			if (s)
				gate(op, COLL_SEM_REDUCE, reduce_base + k - P + 1);
			op = add(b, NPROXY_NET_OP_RECV, b->prev, piece_len(sp, recv_idx, p),
				 at(mr, 0), at(c->scratch_mr, s * slot + in_slot));
			announce(op, COLL_SEM_RECV);
			op = add(b, NPROXY_NET_OP_REDUCE, 0, piece_len(sp, recv_idx, p),
				 at(c->scratch_mr, s * slot + in_slot),
				 at(mr, piece_off(sp, recv_idx, p)));
			op->dtype = (uint8_t)d->dtype;
			op->redop = (uint8_t)d->redop;
			gate(op, COLL_SEM_RECV, recv_base + k + 1);
			announce(op, COLL_SEM_REDUCE);
		}
	}
}

/*
 * Then the allgather phase: piece p of a whole chunk goes on after its
 * last reduction (first step) or once it arrived (later steps).
 */
static void build_allreduce(struct builder *b, uint32_t mr, const struct split *sp,
			    const struct nproxy_coll_desc *d, uint64_t recv_base,
			    uint64_t reduce_base)
{
	struct nproxy_coll *c = b->c;
	uint32_t W = c->n_ranks, r = c->me, P = sp->pieces;
	uint64_t rs = (uint64_t)(W - 1) * P;	/* RECVs and REDUCEs of the first phase */
	struct nproxy_net_op *op;

	build_reduce_scatter(b, mr, sp, d, recv_base, reduce_base);
	for (uint32_t t = 0; t + 1 < W; t++) {
		uint32_t send_idx = (r + 1 + W - t) % W, recv_idx = (r + W - t) % W;

		for (uint32_t p = 0; p < P; p++) {
			op = add(b, NPROXY_NET_OP_SEND, b->next, piece_len(sp, send_idx, p),
				 at(mr, piece_off(sp, send_idx, p)), at(mr, 0));
			if (t)
				gate(op, COLL_SEM_RECV, recv_base + rs + (uint64_t)(t - 1) * P + p + 1);
			else
				gate(op, COLL_SEM_REDUCE, reduce_base + rs - P + p + 1);
			op = add(b, NPROXY_NET_OP_RECV, b->prev, piece_len(sp, recv_idx, p),
				 at(mr, 0), at(mr, piece_off(sp, recv_idx, p)));
			announce(op, COLL_SEM_RECV);
		}
	}
}

/* The allreduce's landing slots: W - 1 of one chunk each, registered once. */
static enum nproxy_status scratch_for(struct nproxy_coll *c, size_t len)
{
	void *p;

	if (len <= c->scratch_len && c->scratch)
		return NPROXY_SUCCESS;
	if (c->scratch) {
		nproxy_net_mr_deregister(c->net, c->scratch_mr);
		free(c->scratch);
		c->scratch = NULL;
		c->scratch_len = 0;
	}
	p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!p)
		return npx_coll_fail(c, NPROXY_RESOURCE, "allreduce scratch of %zu bytes", len);
	if (nproxy_net_mr_register(c->net, p, len, &c->scratch_mr) != NPROXY_SUCCESS) {
		free(p);
		return npx_coll_fail(c, NPROXY_RESOURCE, "registering the allreduce scratch: %s",
				     nproxy_net_strerror(c->net));
	}
	c->scratch = p;
	c->scratch_len = len;
	return NPROXY_SUCCESS;
}

enum nproxy_status npx_coll_build(struct nproxy_coll *c, const struct nproxy_coll_desc *d,
				  uint64_t recv_base, uint64_t reduce_base,
				  uint64_t *recv_final, uint64_t *reduce_final)
{
	uint32_t W = c->n_ranks;
	size_t esize = nproxy_dtype_size((enum nproxy_dtype)d->dtype);
	struct builder b = { .c = c, .next = (c->me + 1) % W, .prev = (c->me + W - 1) % W };
	uint64_t total = d->kind == NPROXY_COLL_ALLGATHER ? d->count * W : d->count;
	enum nproxy_status st;
	uint32_t mr;

	if (!grow_ops(c, 5 * W * COLL_MAX_PIECES + 2))
		return npx_coll_fail(c, NPROXY_RESOURCE, "FIFOs for %u ranks", W);
	*recv_final = recv_base;
	*reduce_final = reduce_base;
	switch (d->kind) {
	case NPROXY_COLL_ALLGATHER: {
		/* Two ranks forward nothing: pieces would only add messages. */
		struct split sp = { .per = d->count, .count = total, .esize = esize };

		split_pieces(&sp, W > 2 ? COLL_MAX_PIECES : 1);
		st = npx_coll_mr(c, d->recvbuf, total * esize, &mr);
		if (st != NPROXY_SUCCESS)
			return st;
		build_allgather(&b, mr, &sp, recv_base);
		*recv_final = recv_base + (uint64_t)(W - 1) * sp.pieces;
		break;
	}
	case NPROXY_COLL_ALLREDUCE: {
		struct split sp = { .per = (d->count + W - 1) / W, .count = d->count, .esize = esize };

		split_pieces(&sp, COLL_MAX_PIECES);
		st = scratch_for(c, (size_t)((W - 1) * sp.per * esize));
		if (st == NPROXY_SUCCESS)
			st = npx_coll_mr(c, d->recvbuf, total * esize, &mr);
		if (st != NPROXY_SUCCESS)
			return st;
		build_allreduce(&b, mr, &sp, d, recv_base, reduce_base);
		*recv_final = recv_base + 2 * (uint64_t)(W - 1) * sp.pieces;
		*reduce_final = reduce_base + (uint64_t)(W - 1) * sp.pieces;
		break;
	}
	case NPROXY_COLL_SENDRECV: {
		uint32_t smr, rmr;
		struct nproxy_net_op *op;

		st = npx_coll_mr(c, d->sendbuf, d->count * esize, &smr);
		if (st == NPROXY_SUCCESS)
			st = npx_coll_mr(c, d->recvbuf, d->count * esize, &rmr);
		if (st != NPROXY_SUCCESS)
			return st;
		add(&b, NPROXY_NET_OP_SEND, b.next, (uint32_t)(d->count * esize), at(smr, 0),
		    at(rmr, 0));
		op = add(&b, NPROXY_NET_OP_RECV, b.prev, (uint32_t)(d->count * esize), at(smr, 0),
			 at(rmr, 0));
		announce(op, COLL_SEM_RECV);
		*recv_final = recv_base + 1;
		break;
	}
	default:
		return npx_coll_fail(c, NPROXY_INVALID, "kind %u cannot be built", d->kind);
	}
	c->block = (struct nproxy_fifo_set){ .ops = c->ops, .n_ops = b.n, .src = c->src,
					     .n_src = b.n, .dst = c->dst, .n_dst = b.n };
	return NPROXY_SUCCESS;
}
