// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Host barrier over the engine's endpoint, in its own tag space (bit 63):
 * a dissemination barrier, ceil(log2 n) rounds; in round k rank r sends to
 * r + 2^k and waits for r - 2^k.  Split into arrive()/test() so the one
 * proxy worker can drive several ranks' barriers without blocking; test()
 * drives the CQ (manual progress) and the per-barrier deadline.
 *
 * On ofi_rxd endpoints the receives are posted one barrier ahead: arriving
 * at barrier s posts every round's receive of barrier s + 1 (those of s
 * were posted when s - 1 was arrived at, or at open), so no barrier
 * message ever arrives before its receive.  A peer sends for s + 1 only
 * after its barrier s completed, which needs this rank's arrival at s.
 * Why it matters: ofi_rxd (1.17)
 * loses a message when a receive is posted that matches an unexpected
 * message from a peer while a longer message from the same peer is
 * arriving into another posted receive: rxd_progress_unexp_msg() leaves
 * the peer's current receive id pointing at the unexpected message's
 * entry, and the rest of the longer message goes there.  Its sender sees
 * the message acknowledged; its receiver never completes it.  A barrier
 * receive posted late, while the next op's data from the same peer was
 * arriving, did exactly that (4 ranks, recursive doubling, 1 hang in 8
 * runs under ASan).  Other providers post round k's receive when the
 * barrier reaches round k, as before: posted ahead, 80 ranks over
 * tcp;ofi_rxm (10 namespace hosts) stalled in the first ring op after the
 * open in 4 runs of 5 (0 of 3 without); why is not known.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <nproxy/log.h>
#include "net_internal.h"

#define BAR_MAX_ROUNDS	12	/* 2^12 == NPROXY_NET_MAX_RANKS */

/* Barrier seq's receives and received payloads: slot seq & 1. */
#define BAR_SLOTS	2

struct net_barrier {
	uint64_t seq;			/* the barrier in flight (active) or last done */
	bool active;
	uint32_t rounds;
	uint32_t round;			/* first round whose recv has not arrived */
	int64_t arrived_ms;
	int64_t moved_ms;		/* arrival, or the last round that completed */
	struct net_req send[BAR_MAX_ROUNDS];
	struct net_req recv[BAR_SLOTS][BAR_MAX_ROUNDS];
	uint64_t recv_seq[BAR_SLOTS];	/* the barrier each slot's receives are for */
	bool ahead;			/* receives posted one barrier ahead (ofi_rxd) */
	/* [0, R): sent; [R + slot * R, ...): received; registered */
	uint64_t *payload;
	uint32_t mr;
};

static uint64_t *recv_payload(struct net_barrier *bar, uint64_t seq, uint32_t k)
{
	return &bar->payload[BAR_MAX_ROUNDS * (1 + (seq & 1)) + k];
}

static enum nproxy_status post_recvs(struct nproxy_net *net, uint64_t seq, uint32_t rounds);

enum nproxy_status npx_net_barrier_init(struct nproxy_net *net)
{
	struct net_barrier *bar = calloc(1, sizeof(*bar));
	enum nproxy_status st;

	if (!bar)
		return NPROXY_RESOURCE;
	while ((1u << bar->rounds) < net->n_ranks)
		bar->rounds++;
	/* FI_MR_ALLOCATED: the registered payload is real heap memory. */
	bar->payload = calloc((1 + BAR_SLOTS) * BAR_MAX_ROUNDS, sizeof(uint64_t));
	if (!bar->payload) {
		free(bar);
		return NPROXY_RESOURCE;
	}
	st = npx_net_mr_register_locked(net, bar->payload,
					(1 + BAR_SLOTS) * BAR_MAX_ROUNDS * sizeof(uint64_t), &bar->mr);
	if (st != NPROXY_SUCCESS) {
		free(bar->payload);
		free(bar);
		return st;
	}
	for (uint32_t k = 0; k < BAR_MAX_ROUNDS; k++) {
		bar->send[k].kind = bar->recv[0][k].kind = bar->recv[1][k].kind = NET_REQ_BARRIER;
		bar->send[k].is_send = 1;
	}
	net->bar = bar;
	bar->ahead = net->info && net->info->ep_attr &&
		     net->info->ep_attr->protocol == FI_PROTO_RXD;
	if (!bar->ahead)
		return NPROXY_SUCCESS;
	/*
	 * Barrier 1's receives now, before any peer can finish barrier 0.
	 * Barrier 0's are posted by npx_net_barrier_connect().
	 */
	bar->recv_seq[1] = 1;
	return post_recvs(net, 1, bar->rounds);
}

/* Before the endpoint closes: cancel what is still posted. */
void npx_net_barrier_cancel(struct nproxy_net *net)
{
	if (!net->bar)
		return;
	for (uint32_t i = 0; i < BAR_SLOTS; i++)
		for (uint32_t k = 0; k < BAR_MAX_ROUNDS; k++)
			if (net->bar->recv[i][k].posted)
				fi_cancel(&net->ep->fid, &net->bar->recv[i][k].ctx);
}

/* After the endpoint closed: no provider can touch the requests any more. */
void npx_net_barrier_free(struct nproxy_net *net)
{
	if (!net->bar)
		return;
	free(net->bar->payload);
	free(net->bar);
	net->bar = NULL;
}

static uint64_t bar_tag(struct nproxy_net *net, uint64_t seq, uint32_t src, uint32_t round)
{
	return net_tag(NET_TAG_BARRIER, net->comm_id, 0, (uint32_t)seq, src, round);
}

/*
 * Hand barrier seq's slot to it: its receives are posted afresh.  The slot
 * held barrier seq - 2's, all arrived (that barrier completed).
 */
static void take_slot(struct net_barrier *bar, uint64_t seq)
{
	struct net_req *recv = bar->recv[seq & 1];

	if (bar->recv_seq[seq & 1] == seq)
		return;
	bar->recv_seq[seq & 1] = seq;
	for (uint32_t k = 0; k < bar->rounds; k++)
		recv[k].done = 0;
}

/*
 * Post barrier seq's receives of rounds [0, rounds) not posted yet;
 * -FI_EAGAIN leaves them for the next test().
 */
static enum nproxy_status post_recvs(struct nproxy_net *net, uint64_t seq, uint32_t rounds)
{
	struct net_barrier *bar = net->bar;
	struct net_req *recv = bar->recv[seq & 1];
	void *desc = net->mrs[bar->mr].desc;

	for (uint32_t k = 0; k < rounds; k++) {
		uint32_t dist = 1u << k;
		uint32_t from = (net->rank + net->n_ranks - dist % net->n_ranks) % net->n_ranks;
		ssize_t rc;

		if (recv[k].posted || recv[k].done)
			continue;
		recv[k].peer = from;
		rc = fi_trecv(net->ep, recv_payload(bar, seq, k), sizeof(uint64_t), desc,
			      FI_ADDR_UNSPEC, bar_tag(net, seq, from, k), 0, &recv[k].ctx);
		if (rc == -FI_EAGAIN)
			return NPROXY_SUCCESS;
		if (rc)
			return npx_net_post_error(net, rc, "host barrier: recv from", from);
		recv[k].posted = 1;
	}
	return NPROXY_SUCCESS;
}

/*
 * Post whatever of the active barrier's round k is not posted yet, and the
 * receives of this barrier and the next; -FI_EAGAIN leaves it for the next
 * test().
 */
static enum nproxy_status post_round(struct nproxy_net *net, uint32_t k)
{
	struct net_barrier *bar = net->bar;
	uint32_t dist = 1u << k;
	uint32_t to = (net->rank + dist) % net->n_ranks;
	void *desc = net->mrs[bar->mr].desc;
	enum nproxy_status st;
	ssize_t rc;

	/*
	 * Posted ahead, every round's receive of this barrier and the next;
	 * else round k's once the barrier reached round k.  (The open's
	 * barrier, 0, always goes round by round: with all its rounds posted
	 * at once, 80 ranks over tcp;ofi_rxm stalled in the first ring op.)
	 */
	st = post_recvs(net, bar->seq, bar->ahead && bar->seq ? bar->rounds : k + 1);
	if (st == NPROXY_SUCCESS && bar->ahead)
		st = post_recvs(net, bar->seq + 1, bar->rounds);
	if (st != NPROXY_SUCCESS)
		return st;
	if (!bar->send[k].posted && !bar->send[k].done) {
		bar->send[k].peer = to;
		bar->payload[k] = bar->seq;
		rc = fi_tsend(net->ep, &bar->payload[k], sizeof(uint64_t), desc, net->peers[to],
			      bar_tag(net, bar->seq, net->rank, k), &bar->send[k].ctx);
		if (rc == -FI_EAGAIN) {
			nproxy_log(NPROXY_LOG_DEBUG, "barrier send eagain to %u", to);
			return NPROXY_SUCCESS;
		}
		if (rc)
			return npx_net_post_error(net, rc, "host barrier: send to", to);
		bar->send[k].posted = 1;
	}
	return NPROXY_SUCCESS;
}

static enum nproxy_status bar_arrive(void *ctx, uint64_t seq)
{
	struct nproxy_net *net = ctx;
	struct net_barrier *bar = net->bar;
	enum nproxy_status st = NPROXY_SUCCESS;

	pthread_mutex_lock(&net->lock);
	if (net->failed) {
		st = net->failed;
		goto out;
	}
	if (bar->active || seq != bar->seq + 1) {
		npx_net_set_err(net, "host barrier %" PRIu64 ": arrive out of order (%s barrier %" PRIu64 ")",
			    seq, bar->active ? "still in" : "last done", bar->seq);
		st = bar->active ? NPROXY_BUSY : NPROXY_INVALID;
		goto out;
	}
	bar->seq = seq;
	bar->round = 0;
	bar->arrived_ms = bar->moved_ms = npx_now_ms();
	bar->active = bar->rounds > 0;
	net->first_barrier_in = seq == 1 && bar->active;
	for (uint32_t k = 0; k < bar->rounds; k++)
		bar->send[k].done = 0;
	/* This barrier's receives are posted (some may have arrived): keep them. */
	take_slot(bar, seq);
	take_slot(bar, seq + 1);
	if (bar->active)
		st = post_round(net, 0);
out:
	pthread_mutex_unlock(&net->lock);
	return st;
}

/*
 * Drive barrier `seq` (the active one) as far as it goes without waiting;
 * net->lock held.  `limit_ms` from the arrival is its deadline; < 0: the
 * waited-for peer's (npx_net_peer_limit_ms()) from the arrival or the last
 * round done, whichever is later (a wait on a peer still setting up, then
 * on one already heard from, must not inherit the first wait's time);
 * `what` names it in the error.
 */
static enum nproxy_status bar_step(struct nproxy_net *net, uint64_t seq, bool *done, int limit_ms,
				   const char *what)
{
	struct net_barrier *bar = net->bar;
	enum nproxy_status st;
	uint32_t moved = 0, wait_round, peer;
	int64_t since;

	st = net->failed;
	if (st == NPROXY_SUCCESS)
		st = npx_net_drain_cq(net, &moved);
	/* A send that met -FI_EAGAIN in an earlier round is still unposted. */
	for (uint32_t k = 0; st == NPROXY_SUCCESS && k < bar->round; k++)
		st = post_round(net, k);
	while (st == NPROXY_SUCCESS && bar->round < bar->rounds) {
		uint32_t k = bar->round;

		st = post_round(net, k);
		/* Both halves of round k must be in the provider's hands before
		 * round k+1: a send refused with -FI_EAGAIN is retried here. */
		if (st != NPROXY_SUCCESS || !bar->recv[seq & 1][k].done ||
		    !(bar->send[k].posted || bar->send[k].done))
			break;
		if (*recv_payload(bar, seq, k) != seq) {
			npx_net_set_err(net, "%s %" PRIu64 ": rank %u sent barrier %" PRIu64
				    " in round %u", what, seq, bar->recv[seq & 1][k].peer,
				    *recv_payload(bar, seq, k), k);
			st = NPROXY_NET_ERROR;
			break;
		}
		bar->round++;
		bar->moved_ms = npx_now_ms();
	}
	if (st != NPROXY_SUCCESS)
		return st;
	if (bar->round == bar->rounds) {
		bool sent = true;

		for (uint32_t k = 0; k < bar->rounds; k++)
			sent &= bar->send[k].done;
		if (sent) {
			bar->active = false;
			net->first_barrier_in = false;
			/*
			 * A caller's barrier (the open's is 0) done: every rank
			 * reached an op after its open, the peers this rank only
			 * sends to (a ring's next rank) among them.
			 */
			for (uint32_t r = 0; seq && net->opened && r < net->n_ranks; r++)
				net->heard[r] = true;
			*done = true;
			return NPROXY_SUCCESS;
		}
	}
	wait_round = bar->round < bar->rounds ? bar->round : 0;
	peer = bar->round < bar->rounds ? bar->recv[seq & 1][wait_round].peer :
					  bar->send[wait_round].peer;
	since = bar->arrived_ms;
	if (limit_ms < 0) {
		limit_ms = npx_net_peer_limit_ms(net, peer);
		since = bar->moved_ms;
	}
	if (npx_now_ms() - since > limit_ms) {
		char host[64];

		npx_net_peer_host(net, peer, host, sizeof(host));
		npx_net_set_err(net, "%s %" PRIu64 ": round %u (%s rank %u) not done within %d ms: peer dead or unreachable (host %s)",
			    what, seq, wait_round, bar->round < bar->rounds ? "recv from" : "send to",
			    peer, limit_ms, host);
		st = NPROXY_TIMEOUT;
		if (!net->failed)
			net->failed = st;
	}
	return st;
}

static enum nproxy_status bar_test(void *ctx, uint64_t seq, bool *done)
{
	struct nproxy_net *net = ctx;
	struct net_barrier *bar = net->bar;
	enum nproxy_status st;

	*done = false;
	pthread_mutex_lock(&net->lock);
	if (seq > bar->seq || seq == 0) {
		npx_net_set_err(net, "host barrier %" PRIu64 ": tested before arrive (at %" PRIu64 ")",
			    seq, bar->seq);
		st = NPROXY_INVALID;
	} else if (seq < bar->seq || !bar->active) {
		*done = true;
		st = NPROXY_SUCCESS;
	} else {
		st = bar_step(net, seq, done, -1, "host barrier");
	}
	pthread_mutex_unlock(&net->lock);
	return st;
}

/*
 * Connect before the first op.  Connected providers over RDM (ofi_rxm)
 * connect on the first message to a peer, and at 64 ranks over 8 hosts
 * the first collective spent seconds connecting, inside the ops' own
 * no-progress deadline.  One dissemination barrier at open, numbered 0
 * (the callers' barriers start at 1), connects every rank to r +- 2^k,
 * its ring neighbours among them, under the open's (rendezvous) deadline;
 * every rank is inside nproxy_net_open() then, driving its progress.
 */
enum nproxy_status npx_net_barrier_connect(struct nproxy_net *net, int limit_ms)
{
	struct net_barrier *bar = net->bar;
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 200000 };
	enum nproxy_status st;
	bool done = false;

	if (!bar->rounds)
		return NPROXY_SUCCESS;
	bar->seq = 0;
	bar->round = 0;
	bar->arrived_ms = bar->moved_ms = npx_now_ms();
	bar->active = true;
	for (uint32_t k = 0; k < bar->rounds; k++)
		bar->send[k].done = 0;
	take_slot(bar, 0);
	take_slot(bar, 1);
	st = post_round(net, 0);
	while (st == NPROXY_SUCCESS && !done) {
		st = bar_step(net, 0, &done, limit_ms, "connecting to the peers: barrier");
		if (st == NPROXY_SUCCESS && !done)
			nanosleep(&nap, NULL);
	}
	return st;
}

const struct nproxy_host_barrier_ops npx_net_barrier_ops = {
	.name = "libfabric",
	.arrive = bar_arrive,
	.test = bar_test,
};
