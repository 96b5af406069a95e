// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The completion queue the engine's ops and the host barrier share:
 * drained (manual progress) by whichever of them the proxy worker is
 * driving, each completion handed to its request's kind here (an op's
 * back-edge to the device, a barrier round), errors recorded with the op
 * they belong to.
 */
#include <inttypes.h>
#include <stdio.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "net_internal.h"

#define NET_CQ_BATCH		16	/* entries per fi_cq_read */
#define NET_CQ_MAX_PER_TICK	256	/* bound on one tick's draining */

int npx_net_peer_limit_ms(const struct nproxy_net *net, uint32_t peer)
{
	/* A rank is never late to itself: a refused post to self is local. */
	if (!net->opened || peer >= net->n_ranks || peer == net->rank ||
	    net->open_limit_ms <= net->timeout_ms)
		return net->timeout_ms;
	if (net->first_barrier_in || !net->heard[peer])
		return net->open_limit_ms;
	return net->timeout_ms;
}

int npx_net_refused_limit_ms(const struct nproxy_net *net, uint32_t peer)
{
	if (net->opened && peer < net->n_ranks && net->reached[peer] && !net->first_barrier_in)
		return net->timeout_ms;
	return npx_net_peer_limit_ms(net, peer);
}

/*
 * A completion involving peer; a receive says the peer is past its open,
 * a send that its endpoint took this rank's messages since the open.
 */
static void peer_active(struct nproxy_net *net, const struct net_req *req)
{
	net->last_activity_ms[req->peer] = npx_net_pass_ms(net);
	if (net->opened)
		*(req->is_send ? &net->reached[req->peer] : &net->heard[req->peer]) = true;
}

void npx_net_barrier_complete(struct nproxy_net *net, struct net_req *req, bool ok)
{
	req->posted = 0;
	req->done = ok;
	if (ok)
		peer_active(net, req);
}

static void apply_sems(struct net_block *b, const struct nproxy_net_op *op);

static void op_completed(struct nproxy_net *net, struct net_op_state *s)
{
	struct net_block *b = s->blk;
	const struct nproxy_net_op *op;

	s->req.posted = 0;
	s->req.done = 1;
	net->inflight[s->req.peer * 2 + s->req.is_send]--;
	peer_active(net, &s->req);
	b->n_inflight--;
	if (b->retired) {
		npx_net_block_free_if_reaped(net, b);
		return;
	}
	b->n_done++;
	op = &b->fifos.ops[s->idx];
	apply_sems(b, op);
}

/* A local op (REDUCE, COPY) finished in the posting pass: the same back-edge. */
void npx_net_local_op_done(struct nproxy_net *net, struct net_op_state *s)
{
	struct net_block *b = s->blk;

	s->req.done = 1;
	net->last_activity_ms[net->rank] = npx_net_pass_ms(net);
	b->n_done++;
	apply_sems(b, &b->fifos.ops[s->idx]);
}

static void apply_sems(struct net_block *b, const struct nproxy_net_op *op)
{
	if (!(op->flags & NPROXY_NET_OP_F_COMPLETE))
		return;
	/*
	 * The back-edge: tell the device this slice is done (nec_inc_semaphore),
	 * in FIFO order per semaphore -- an op completing ahead of an earlier
	 * one on the same semaphore is applied when that one completes.
	 */
	for (uint32_t *head = &b->sem_head[op->post_sem];
	     *head != NET_NONE && b->st[*head].req.done; *head = b->next_same_sem[*head]) {
		const struct nproxy_net_op *ready = &b->fifos.ops[*head];

		nproxy_device_sem_add(&b->dev, ready->post_sem, ready->post_inc);
	}
}

static enum nproxy_status read_cq_error(struct nproxy_net *net)
{
	struct fi_cq_err_entry e = { 0 };
	char prov_text[128] = "";
	struct net_req *req;
	ssize_t rc;

	rc = fi_cq_readerr(net->cq, &e, 0);
	if (rc == -FI_EAGAIN)
		return NPROXY_SUCCESS;
	if (rc < 0) {
		npx_net_set_err(net, "fi_cq_readerr: %s", fi_strerror((int)-rc));
		return npx_net_fail(net, NPROXY_NET_ERROR);
	}
	req = e.op_context;
	if (e.prov_errno || e.err_data_size) {
		const char *t = fi_cq_strerror(net->cq, e.prov_errno, e.err_data, prov_text,
					       sizeof(prov_text));

		if (t && t != prov_text)
			snprintf(prov_text, sizeof(prov_text), "%s", t);
	}
	if (!req) {
		npx_net_set_err(net, "completion error without context: %s (%s)",
			    fi_strerror(e.err), prov_text);
		return npx_net_fail(net, NPROXY_NET_ERROR);
	}
	if (req->kind == NET_REQ_ABORT) {
		/* An abort to a rank that is gone fails; that ends nothing. */
		npx_net_abort_complete(net, req, false);
		if (e.err != FI_ECANCELED)
			nproxy_log(NPROXY_LOG_WARN, "net rank %u: abort %s rank %u: %s (%s)",
				   net->rank, req->is_send ? "send to" : "receive from",
				   req->peer, fi_strerror(e.err), prov_text);
		return NPROXY_SUCCESS;
	}
	if (req->kind == NET_REQ_BARRIER) {
		npx_net_barrier_complete(net, req, false);
		if (e.err == FI_ECANCELED)
			return NPROXY_SUCCESS;
		npx_net_set_err(net, "host barrier %s rank %u failed: %s (%s)",
			    req->is_send ? "send to" : "recv from", req->peer, fi_strerror(e.err),
			    prov_text);
		return npx_net_fail(net, NPROXY_NET_ERROR);
	} else {
		struct net_op_state *s = (struct net_op_state *)req;
		struct net_block *b = s->blk;
		const struct nproxy_net_op *op = b->retired ? NULL : &b->fifos.ops[s->idx];
		uint32_t stream = b->stream, bb = b->bb, idx = s->idx, len = op ? op->len : 0;
		uint64_t tag = s->tag;

		bool is_send = req->is_send;
		uint32_t peer = req->peer;

		s->req.done = 0;
		s->req.posted = 0;
		net->inflight[req->peer * 2 + req->is_send]--;
		b->n_inflight--;
		if (b->retired) {
			npx_net_block_free_if_reaped(net, b);
			if (e.err == FI_ECANCELED)
				return NPROXY_SUCCESS;
		}
		/* b (and s) may be gone: only the copies above from here on. */
		npx_net_set_err(net, "stream %u bb %u op %u (%s rank %u, %u bytes, tag %#" PRIx64
			    ") failed: %s (%s)", stream, bb, idx, is_send ? "send to" : "recv from",
			    peer, len, tag, fi_strerror(e.err), prov_text);
		/* A message longer than the recv; shm reports the errno negated. */
		return npx_net_fail(net, e.err == FI_ETRUNC || e.err == -FI_ETRUNC ?
				    NPROXY_INVALID : NPROXY_NET_ERROR);
	}
}

enum nproxy_status npx_net_drain_cq(struct nproxy_net *net, uint32_t *moved)
{
	struct fi_cq_tagged_entry ent[NET_CQ_BATCH];
	uint32_t total = 0;

	net->pass_ms = 0;	/* a new pass: its clock is read when first needed */
	while (total < NET_CQ_MAX_PER_TICK) {
		ssize_t n = fi_cq_read(net->cq, ent, NET_CQ_BATCH);

		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			enum nproxy_status st = read_cq_error(net);

			if (st != NPROXY_SUCCESS)
				return st;
			total++;
			continue;
		}
		if (n < 0) {
			npx_net_set_err(net, "fi_cq_read: %s", fi_strerror((int)-n));
			return npx_net_fail(net, NPROXY_NET_ERROR);
		}
		for (ssize_t i = 0; i < n; i++) {
			struct net_req *req = ent[i].op_context;

			if (req->kind == NET_REQ_BARRIER) {
				npx_net_barrier_complete(net, req, true);
				continue;
			}
			if (req->kind == NET_REQ_ABORT) {
				npx_net_abort_complete(net, req, true);
				continue;
			}
			struct net_op_state *s = (struct net_op_state *)req;

			if (!req->is_send && !s->blk->retired &&
			    ent[i].len != s->blk->fifos.ops[s->idx].len) {
				npx_net_set_err(net, "stream %u bb %u op %u: recv from rank %u got %zu bytes, expected %u",
					    s->blk->stream, s->blk->bb, s->idx, req->peer,
					    (size_t)ent[i].len, s->blk->fifos.ops[s->idx].len);
				op_completed(net, s);
				return npx_net_fail(net, NPROXY_INVALID);
			}
			op_completed(net, s);
		}
		total += (uint32_t)n;
		if (n < NET_CQ_BATCH)
			break;
	}
	*moved += total;
	return NPROXY_SUCCESS;
}
