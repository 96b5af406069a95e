// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone rings: each rank produces into its own ring (single
 * producer), every other rank reads every message of it (many readers).
 *
 * The producer fills slot head % slots, then publishes head + 1 with a
 * release store; a reader copies the slot out, then publishes its own
 * consumed counter with a release store.  The producer only reuses a slot
 * once every reader still present has consumed it (flow control), so a
 * message larger than the ring simply streams through it in fragments of
 * BP_SLOT_PAYLOAD bytes while the readers drain it.
 *
 * A collective is one message per source rank (all ranks for all-gather,
 * the leader for bcast).  A single step() both publishes what fits and
 * drains what is there, so a rank blocked on a full ring still empties
 * the others' rings: no cycle of full rings can form.
 */
#include <stdlib.h>
#include <string.h>
#include "bananaphone_internal.h"

#define BP_SRC_SPACE	0xfffffffeu	/* notify source: "your ring has room" */

struct bp_xfer {
	enum bp_op op;
	uint64_t op_seq;
	uint64_t sources;	/* bit r: rank r sends a message */
	const uint8_t *data;	/* my message, if I am a source */
	size_t len;
	uint64_t frags_total;
	uint64_t frags_sent;
	uint64_t pending;	/* sources whose message I still miss */
	uint8_t **bufs;
	size_t *lens;
	uint64_t got[NPROXY_BP_MAX_RANKS];
	bool started[NPROXY_BP_MAX_RANKS];
};

static const char *op_name(uint32_t op)
{
	switch (op) {
	case BP_OP_ALLGATHER:
		return "allgather";
	case BP_OP_BCAST:
		return "bcast";
	default:
		return "unknown";
	}
}

/* Slowest reader of my ring; readers that hung up no longer count. */
static uint64_t slowest_reader(struct nproxy_bp *bp)
{
	struct bp_ring_hdr *ring = npx_bp_ring(bp, bp->rank);
	uint64_t min = bp->head;
	uint32_t r;

	for (r = 0; r < bp->n; r++) {
		uint64_t c;

		if (r == bp->rank || atomic_load(&npx_bp_rank_ctl(bp, r)->left))
			continue;
		c = atomic_load_explicit(&ring->consumed[r].v, memory_order_acquire);
		if (c < min)
			min = c;
	}
	return min;
}

static bool send_some(struct nproxy_bp *bp, struct bp_xfer *x)
{
	struct bp_ring_hdr *ring = npx_bp_ring(bp, bp->rank);
	bool sent = false;

	while (x->frags_sent < x->frags_total) {
		struct bp_slot_hdr *h;
		uint64_t off;
		size_t flen;

		if (bp->head - bp->min_consumed >= BP_RING_SLOTS) {
			bp->min_consumed = slowest_reader(bp);
			if (bp->head - bp->min_consumed >= BP_RING_SLOTS)
				break;
		}
		h = npx_bp_slot(bp, bp->rank, bp->head);
		off = x->frags_sent * BP_SLOT_PAYLOAD;
		flen = x->len - off < BP_SLOT_PAYLOAD ? x->len - off : BP_SLOT_PAYLOAD;
		h->op = x->op;
		h->frag_len = (uint32_t)flen;
		h->op_seq = x->op_seq;
		h->msg_len = x->len;
		h->frag_off = off;
		if (flen)
			memcpy((uint8_t *)h + BP_SLOT_HDR, x->data + off, flen);
		bp->head++;
		atomic_store_explicit(&ring->head.v, bp->head, memory_order_release);
		x->frags_sent++;
		sent = true;
	}
	if (sent)
		npx_bp_notify_all(bp, false);
	return sent;
}

/* Copy out one fragment from ring p (already published).  false: broken. */
static bool take_fragment(struct nproxy_bp *bp, struct bp_xfer *x, uint32_t p, uint64_t idx)
{
	const struct bp_slot_hdr *h = npx_bp_slot(bp, p, idx);
	struct bp_slot_hdr hdr = *h;

	if (hdr.op != x->op || hdr.op_seq != x->op_seq) {
		npx_bp_fail(bp, NPROXY_INVALID,
			"rank %u (pid %d) sent %s #%llu while this rank is in %s #%llu: ranks called the collectives in different orders",
			p, (int)bp->pids[p], op_name(hdr.op), (unsigned long long)hdr.op_seq,
			op_name(x->op), (unsigned long long)x->op_seq);
		return false;
	}
	if (!x->started[p]) {
		if (hdr.msg_len > NPROXY_BP_MAX_BLOB || hdr.frag_off != 0) {
			npx_bp_fail(bp, NPROXY_FAILURE,
				"rank %u (pid %d) ring is corrupt: message of %llu bytes starting at %llu",
				p, (int)bp->pids[p], (unsigned long long)hdr.msg_len,
				(unsigned long long)hdr.frag_off);
			return false;
		}
		x->bufs[p] = malloc(hdr.msg_len ? hdr.msg_len : 1);
		if (!x->bufs[p]) {
			npx_bp_fail(bp, NPROXY_RESOURCE, "out of memory for %llu bytes from rank %u",
				(unsigned long long)hdr.msg_len, p);
			return false;
		}
		x->lens[p] = hdr.msg_len;
		x->started[p] = true;
	}
	if (hdr.msg_len != x->lens[p] || hdr.frag_off != x->got[p] ||
	    hdr.frag_len > BP_SLOT_PAYLOAD || hdr.frag_len > hdr.msg_len - hdr.frag_off ||
	    (hdr.frag_len == 0 && hdr.msg_len != 0)) {
		npx_bp_fail(bp, NPROXY_FAILURE,
			"rank %u (pid %d) ring is corrupt: fragment %u bytes at %llu of %llu, expected offset %llu",
			p, (int)bp->pids[p], hdr.frag_len, (unsigned long long)hdr.frag_off,
			(unsigned long long)hdr.msg_len, (unsigned long long)x->got[p]);
		return false;
	}
	if (hdr.frag_len)
		memcpy(x->bufs[p] + hdr.frag_off, (const uint8_t *)h + BP_SLOT_HDR, hdr.frag_len);
	x->got[p] += hdr.frag_len;
	if (x->got[p] == x->lens[p])
		x->pending &= ~(1ull << p);
	return true;
}

static enum bp_step xfer_step(struct nproxy_bp *bp, void *arg, uint32_t *wait_for)
{
	struct bp_xfer *x = arg;
	bool moved = false, send_blocked;
	uint32_t p;

	if (x->frags_sent < x->frags_total)
		moved |= send_some(bp, x);
	for (p = 0; p < bp->n; p++) {
		struct bp_ring_hdr *ring;
		uint64_t head, c;

		if (!(x->pending & (1ull << p)))
			continue;
		ring = npx_bp_ring(bp, p);
		head = atomic_load_explicit(&ring->head.v, memory_order_acquire);
		c = bp->consumed[p];
		if (c == head)
			continue;
		while (c < head && (x->pending & (1ull << p))) {
			if (!take_fragment(bp, x, p, c))
				return BP_STEP_ERROR;
			c++;
		}
		bp->consumed[p] = c;
		atomic_store_explicit(&ring->consumed[bp->rank].v, c, memory_order_release);
		npx_bp_notify(bp, p, BP_SRC_SPACE);
		moved = true;
	}
	send_blocked = x->frags_sent < x->frags_total;
	if (!x->pending && !send_blocked)
		return BP_STEP_DONE;
	if (moved)
		return BP_STEP_MOVED;

	/* Idle: a missing source that hung up will never send. */
	for (p = 0; p < bp->n; p++) {
		if (!(x->pending & (1ull << p)))
			continue;
		if (atomic_load(&npx_bp_rank_ctl(bp, p)->left) &&
		    atomic_load_explicit(&npx_bp_ring(bp, p)->head.v, memory_order_acquire) ==
			    bp->consumed[p]) {
			npx_bp_fail(bp, NPROXY_PEER_LEFT,
				"rank %u (pid %d) hung up before sending its part of %s #%llu",
				p, (int)bp->pids[p], op_name(x->op), (unsigned long long)x->op_seq);
			return BP_STEP_ERROR;
		}
	}
	*wait_for = BP_WAIT_ANY;
	if (!send_blocked)
		*wait_for = (uint32_t)__builtin_ctzll(x->pending);
	return BP_STEP_IDLE;
}

enum nproxy_status npx_bp_ring_collective(struct nproxy_bp *bp, enum bp_op op, const void *data,
				      size_t len, uint64_t sources, uint8_t **bufs,
				      size_t *lens, uint64_t deadline_ns)
{
	bool source = sources & (1ull << bp->rank);
	struct bp_xfer xfer, *x = &xfer;
	enum nproxy_status st;

	memset(x, 0, sizeof(*x));
	x->op = op;
	x->op_seq = ++bp->op_seq;
	x->sources = sources;
	x->data = data;
	x->len = len;
	x->frags_total = source ? (len ? (len + BP_SLOT_PAYLOAD - 1) / BP_SLOT_PAYLOAD : 1) : 0;
	x->pending = sources & ~(1ull << bp->rank);
	x->bufs = bufs;
	x->lens = lens;
	st = npx_bp_wait(bp, xfer_step, x, deadline_ns, op_name(op));
	if (st == NPROXY_TIMEOUT) {
		/* Half a collective may be in the rings: the bus cannot resync. */
		bp->state = BP_S_BROKEN;
		bp->sticky = st;
	}
	return st;
}
