// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The built-in collectives as one basic block of ops each: rings, and
 * recursive doubling where it takes fewer round trips.
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

/* Where each chunk of a W-way split of count elements starts and ends. */
struct split {
	uint64_t per;		/* elements per chunk (the last may be short) */
	uint64_t count;
	size_t esize;
};

static uint64_t chunk_off(const struct split *sp, uint32_t c)
{
	uint64_t e = (uint64_t)c * sp->per;

	return (e < sp->count ? e : sp->count) * sp->esize;
}

static uint32_t chunk_len(const struct split *sp, uint32_t c)
{
	return (uint32_t)(chunk_off(sp, c + 1) - chunk_off(sp, c));
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

/* off bytes into the buffer that starts at base. */
static struct nproxy_net_addr past(struct nproxy_net_addr base, uint64_t off)
{
	return at(base.mr, base.offset + off);
}

static bool same(struct nproxy_net_addr a, struct nproxy_net_addr b)
{
	return a.mr == b.mr && a.offset == b.offset;
}

/*
 * out: the result buffer; in: this rank's input, the first send's source.
 * Out of place (in is not its part of out) a COPY after the ring's ops
 * puts it there: it runs in the posting pass that posted the first send
 * and receives, so it overlaps their transfers, and the send reads the
 * caller's input, not lines this rank has just written.
 */
static void build_allgather(struct builder *b, struct nproxy_net_addr out,
			    struct nproxy_net_addr in, uint64_t part_len, uint64_t recv_base)
{
	uint32_t W = b->c->n_ranks, r = b->c->me;
	struct nproxy_net_addr place = past(out, r * part_len);

	for (uint32_t s = 0; s + 1 < W; s++) {
		uint32_t send_idx = (r + W - s) % W, recv_idx = (r + 2 * W - s - 1) % W;
		struct nproxy_net_op *op;

		op = add(b, NPROXY_NET_OP_SEND, b->next, (uint32_t)part_len,
			 s ? past(out, send_idx * part_len) : in, out);
		if (s)
			gate(op, COLL_SEM_RECV, recv_base + s);
		op = add(b, NPROXY_NET_OP_RECV, b->prev, (uint32_t)part_len, out,
			 past(out, recv_idx * part_len));
		announce(op, COLL_SEM_RECV);
	}
	if (!same(in, place))
		add(b, NPROXY_NET_OP_COPY, 0, (uint32_t)part_len, in, place);
}

/*
 * An allgather of a power-of-two rank count W >= 4: recursive doubling.  In
 * step k (k = 0..log2 W - 1) rank r holds the 2^k parts of its aligned
 * group (r with its k low bits cleared, onwards), contiguous in out, and
 * swaps them with rank r ^ 2^k for that rank's group: log2 W round trips
 * where the ring makes W - 1, the same bytes per rank, and each rank still
 * sends to one peer at a time (never the fan-in of a direct allgather, see
 * Documentation/coll.md).  Step k's send waits for step k - 1's receive
 * (RECV >= k); a receive lands in the partner's group, which none of this
 * rank's sends reads before that receive is in, so receives post ahead.
 * Out of place, the first send reads the input and a COPY puts it into
 * out before the second send, which reads it from there.
 */
static void build_allgather_doubling(struct builder *b, struct nproxy_net_addr out,
				     struct nproxy_net_addr in, uint64_t part_len,
				     uint64_t recv_base)
{
	uint32_t W = b->c->n_ranks, r = b->c->me, k = 0;
	struct nproxy_net_addr place = past(out, r * part_len);

	for (uint32_t dist = 1; dist < W; dist <<= 1, k++) {
		uint32_t partner = r ^ dist, mine = r & ~(dist - 1), theirs = partner & ~(dist - 1);
		struct nproxy_net_op *op;

		op = add(b, NPROXY_NET_OP_SEND, partner, (uint32_t)(dist * part_len),
			 k ? past(out, mine * part_len) : in, out);
		if (k)
			gate(op, COLL_SEM_RECV, recv_base + k);
		op = add(b, NPROXY_NET_OP_RECV, partner, (uint32_t)(dist * part_len), out,
			 past(out, theirs * part_len));
		announce(op, COLL_SEM_RECV);
		if (!k && !same(in, place))
			add(b, NPROXY_NET_OP_COPY, 0, (uint32_t)part_len, in, place);
	}
}

/*
 * The allgather's shape: recursive doubling for a power-of-two rank count
 * of 4 or more (2 ranks: the ring is the same one swap) whose largest swap,
 * half the result, fits one message; else the ring.
 */
static bool coll_allgather_doubles(const struct nproxy_coll *c, uint64_t part_len)
{
	uint32_t W = c->n_ranks;

	return W >= 4 && !(W & (W - 1)) && (uint64_t)(W / 2) * part_len <= UINT32_MAX;
}

/*
 * Out of place, the input is read where it is: the first send's chunk
 * from in, and every chunk this rank reduces is first copied from in to
 * out by one COPY per chunk after the first send and receive (overlapping
 * them), not the whole input up front.  Chunk r itself is never copied:
 * its sum arrives whole in the allgather phase.
 */
static void build_allreduce(struct builder *b, struct nproxy_net_addr out,
			    struct nproxy_net_addr in, const struct split *sp,
			    const struct nproxy_coll_desc *d, uint64_t recv_base,
			    uint64_t reduce_base)
{
	struct nproxy_coll *c = b->c;
	uint32_t W = c->n_ranks, r = c->me;
	uint64_t slot = (uint64_t)sp->per * sp->esize;
	struct nproxy_net_addr scratch = at(c->scratch_mr, 0);
	struct nproxy_net_op *op;

	for (uint32_t s = 0; s + 1 < W; s++) {
		uint32_t send_idx = (r + W - s) % W, recv_idx = (r + 2 * W - s - 1) % W;

		op = add(b, NPROXY_NET_OP_SEND, b->next, chunk_len(sp, send_idx),
			 past(s ? out : in, chunk_off(sp, send_idx)), out);
		if (s)
			gate(op, COLL_SEM_REDUCE, reduce_base + s);
		op = add(b, NPROXY_NET_OP_RECV, b->prev, chunk_len(sp, recv_idx), out,
			 past(scratch, s * slot));
		announce(op, COLL_SEM_RECV);
		if (!s && !same(in, out))
			for (uint32_t k = 1; k < W; k++) {
				uint32_t idx = (r + W - k) % W;

				add(b, NPROXY_NET_OP_COPY, 0, chunk_len(sp, idx),
				    past(in, chunk_off(sp, idx)), past(out, chunk_off(sp, idx)));
			}
		op = add(b, NPROXY_NET_OP_REDUCE, 0, chunk_len(sp, recv_idx),
			 past(scratch, s * slot), past(out, chunk_off(sp, recv_idx)));
		op->dtype = (uint8_t)d->dtype;
		op->redop = (uint8_t)d->redop;
		gate(op, COLL_SEM_RECV, recv_base + s + 1);
		announce(op, COLL_SEM_REDUCE);
	}
	for (uint32_t t = 0; t + 1 < W; t++) {
		uint32_t send_idx = (r + 1 + W - t) % W, recv_idx = (r + W - t) % W;

		op = add(b, NPROXY_NET_OP_SEND, b->next, chunk_len(sp, send_idx),
			 past(out, chunk_off(sp, send_idx)), out);
		if (t)
			gate(op, COLL_SEM_RECV, recv_base + (W - 1) + t);
		else
			gate(op, COLL_SEM_REDUCE, reduce_base + W - 1);
		op = add(b, NPROXY_NET_OP_RECV, b->prev, chunk_len(sp, recv_idx), out,
			 past(out, chunk_off(sp, recv_idx)));
		announce(op, COLL_SEM_RECV);
	}
}

/*
 * A small allreduce of a power-of-two rank count: recursive doubling.  In
 * step k (k = 0..log2 W - 1) rank r swaps its whole partial result with
 * rank r ^ 2^k and reduces what it got into its own: log2 W round trips
 * where the ring makes 2 (W - 1), which is what a small op's time is made
 * of (a trip costs the same at 1 KiB as at 16).  The ring wins once the
 * bytes matter: it moves 2 (W - 1) / W of the data per rank, this moves
 * log2 W times all of it (coll_use_doubling() draws the line).
 *
 * Step k's REDUCE writes the buffer step k's SEND reads, so it waits for
 * both: the SEND and the RECV of a step each add 1 to COLL_SEM_RECV on
 * completion (applied in FIFO order), and the REDUCE is gated on 2 (k + 1).
 * Out of place, the first send goes from the input and a COPY puts the
 * input into the result before the first REDUCE.  Every rank reduces the
 * same partial sums (a op b and b op a), so the ranks' results agree for
 * the commutative operators it is used for (coll_use_doubling()).
 */
static void build_allreduce_doubling(struct builder *b, struct nproxy_net_addr out,
				     struct nproxy_net_addr in, uint64_t bytes,
				     const struct nproxy_coll_desc *d, uint64_t recv_base,
				     uint64_t reduce_base)
{
	struct nproxy_coll *c = b->c;
	struct nproxy_net_addr scratch = at(c->scratch_mr, 0);
	uint32_t k = 0;

	for (uint32_t dist = 1; dist < c->n_ranks; dist <<= 1, k++) {
		uint32_t partner = c->me ^ dist;
		struct nproxy_net_op *op;

		op = add(b, NPROXY_NET_OP_SEND, partner, (uint32_t)bytes, k ? out : in, out);
		if (k)
			gate(op, COLL_SEM_REDUCE, reduce_base + k);
		announce(op, COLL_SEM_RECV);
		op = add(b, NPROXY_NET_OP_RECV, partner, (uint32_t)bytes, out,
			 past(scratch, k * bytes));
		announce(op, COLL_SEM_RECV);
		if (!k && !same(in, out))
			add(b, NPROXY_NET_OP_COPY, 0, (uint32_t)bytes, in, out);
		op = add(b, NPROXY_NET_OP_REDUCE, 0, (uint32_t)bytes, past(scratch, k * bytes), out);
		op->dtype = (uint8_t)d->dtype;
		op->redop = (uint8_t)d->redop;
		gate(op, COLL_SEM_RECV, recv_base + 2 * (k + 1));
		announce(op, COLL_SEM_REDUCE);
	}
}

/*
 * Recursive doubling or the ring: doubling for a power-of-two rank count,
 * at most COLL_DOUBLING_MAX_BYTES, and an operator whose result does not
 * depend on the order of its operands bit for bit (SUM, PROD, AVG; MAX and
 * MIN of floats pick between -0 and +0 by order, so they take the ring,
 * whose allgather phase hands every rank the same bits).
 */
static bool coll_use_doubling(const struct nproxy_coll *c, const struct nproxy_coll_desc *d,
			      uint64_t bytes)
{
	bool float_type = d->dtype == NPROXY_FLOAT16 || d->dtype == NPROXY_FLOAT32 ||
			  d->dtype == NPROXY_FLOAT64 || d->dtype == NPROXY_BFLOAT16;

	if (c->n_ranks < 2 || (c->n_ranks & (c->n_ranks - 1)) || bytes > COLL_DOUBLING_MAX_BYTES)
		return false;
	return !float_type || (d->redop != NPROXY_MAX && d->redop != NPROXY_MIN);
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

/*
 * Where the op reads its input: in place (sendbuf NULL, or where the
 * input goes in recvbuf: place bytes into out) that place, else the
 * caller's sendbuf, registered too.
 */
static enum nproxy_status input_at(struct nproxy_coll *c, const struct nproxy_coll_desc *d,
				   struct nproxy_net_addr out, uint64_t place, uint64_t len,
				   struct nproxy_net_addr *in)
{
	*in = past(out, place);
	if (!d->sendbuf || d->sendbuf == (const char *)d->recvbuf + place)
		return NPROXY_SUCCESS;
	return npx_coll_mr(c, d->sendbuf, len, in);
}

/* Recursive doubling's steps: log2 of the rank count (rounded up). */
static uint32_t doubling_steps(const struct nproxy_coll *c)
{
	uint32_t steps = 0;

	for (uint32_t dist = 1; dist < c->n_ranks; dist <<= 1)
		steps++;
	return steps;
}

/* The allgather's registrations and ops: recursive doubling or the ring. */
static enum nproxy_status add_allgather(struct builder *b, const struct nproxy_coll_desc *d,
					size_t esize, uint64_t recv_base, uint64_t *recv_final)
{
	struct nproxy_coll *c = b->c;
	uint64_t part = d->count * esize, steps;
	struct nproxy_net_addr out, in;
	enum nproxy_status st;

	st = npx_coll_mr(c, d->recvbuf, part * c->n_ranks, &out);
	if (st == NPROXY_SUCCESS)
		st = input_at(c, d, out, c->me * part, part, &in);
	if (st != NPROXY_SUCCESS)
		return st;
	if (coll_allgather_doubles(c, part)) {
		steps = doubling_steps(c);
		build_allgather_doubling(b, out, in, part, recv_base);
	} else {
		steps = c->n_ranks - 1;
		build_allgather(b, out, in, part, recv_base);
	}
	*recv_final = recv_base + steps;
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
	struct nproxy_net_addr out, in;
	enum nproxy_status st;

	if (!grow_ops(c, 6 * W + 2))
		return npx_coll_fail(c, NPROXY_RESOURCE, "FIFOs for %u ranks", W);
	*recv_final = recv_base;
	*reduce_final = reduce_base;
	switch (d->kind) {
	case NPROXY_COLL_ALLGATHER:
		st = add_allgather(&b, d, esize, recv_base, recv_final);
		if (st != NPROXY_SUCCESS)
			return st;
		break;
	case NPROXY_COLL_ALLREDUCE: {
		struct split sp = { .per = (d->count + W - 1) / W, .count = d->count, .esize = esize };
		uint64_t bytes = total * esize, steps = doubling_steps(c);

		if (coll_use_doubling(c, d, bytes)) {
			st = scratch_for(c, (size_t)(steps * bytes));
			if (st == NPROXY_SUCCESS)
				st = npx_coll_mr(c, d->recvbuf, bytes, &out);
			if (st == NPROXY_SUCCESS)
				st = input_at(c, d, out, 0, bytes, &in);
			if (st != NPROXY_SUCCESS)
				return st;
			build_allreduce_doubling(&b, out, in, bytes, d, recv_base, reduce_base);
			*recv_final = recv_base + 2 * steps;
			*reduce_final = reduce_base + steps;
			break;
		}
		st = scratch_for(c, (size_t)((W - 1) * sp.per * esize));
		if (st == NPROXY_SUCCESS)
			st = npx_coll_mr(c, d->recvbuf, total * esize, &out);
		if (st == NPROXY_SUCCESS)
			st = input_at(c, d, out, 0, total * esize, &in);
		if (st != NPROXY_SUCCESS)
			return st;
		build_allreduce(&b, out, in, &sp, d, recv_base, reduce_base);
		*recv_final = recv_base + 2 * (W - 1);
		*reduce_final = reduce_base + (W - 1);
		break;
	}
	case NPROXY_COLL_SENDRECV: {
		struct nproxy_net_op *op;

		st = npx_coll_mr(c, d->sendbuf, d->count * esize, &in);
		if (st == NPROXY_SUCCESS)
			st = npx_coll_mr(c, d->recvbuf, d->count * esize, &out);
		if (st != NPROXY_SUCCESS)
			return st;
		add(&b, NPROXY_NET_OP_SEND, b.next, (uint32_t)(d->count * esize), in, out);
		op = add(&b, NPROXY_NET_OP_RECV, b.prev, (uint32_t)(d->count * esize), in, out);
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
