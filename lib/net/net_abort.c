// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Cross-host abort: the first rank that learns of a death (its host's bus
 * saw a local rank die) tells every other rank over the engine, so that
 * nobody waits out its own deadline.  A no-progress deadline does not
 * start one: in a ring every rank stalls at once, and each would blame
 * its live neighbour; it names the peer's host address in its own error.
 *
 * The message goes down a binomial tree rooted at its origin: the rank
 * at distance d = (r - origin) mod n sends to d + 2^k for every 2^k > d,
 * so it reaches n ranks in ceil(log2 n) hops; a subtree whose root is the
 * dead rank is sent to directly.  Every rank forwards each origin's
 * message once (several host-mates may each start one).  A receiver's
 * engine fails with NPROXY_PEER_DEAD and nproxy_net_abort_reason() names
 * the rank, its pid (when its host knew it), its host's address and the
 * rank that reported it.  The message has its own tag in the host
 * barrier's space (round field all ones, never a barrier round); one
 * receive stays posted from nproxy_net_open() to nproxy_net_close().
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include "net_internal.h"

#define ABORT_MAGIC	0x4e504142u	/* "NPAB" */
#define ABORT_SLOTS	64		/* sends in flight at once */

struct net_abort_msg {
	uint32_t magic;
	uint32_t origin;	/* rank that started this abort */
	uint32_t dead;		/* rank that died or cannot be reached */
	int32_t pid;		/* its pid, 0 when the origin does not know it */
	char host[64];		/* its address as the origin's provider prints it */
	char text[176];		/* what the origin saw */
};

struct net_abort {
	struct net_req recv;
	struct net_req send[ABORT_SLOTS];
	/*
	 * A send the provider refused for now (-FI_EAGAIN: shm's first send to
	 * a peer it has not reached yet; ofi_rxm connecting to a peer the open
	 * did not connect, which is any but r +- 2^k; a full queue): kept in its slot with
	 * its distance in the tree and posted again from nproxy_net_poll()
	 * and nproxy_net_abort()'s flush, not dropped.
	 */
	uint8_t queued[ABORT_SLOTS];
	uint32_t queued_d[ABORT_SLOTS];
	struct net_abort_msg *msgs;	/* [0]: receive buffer, [1 + i]: send slot i */
	uint32_t mr;
	uint8_t *seen;			/* [n_ranks]: origins already forwarded */
	bool have_reason;		/* atomic: set once, after reason is written */
	char reason[NPX_ERR_LEN];
};

static uint64_t abort_tag(struct nproxy_net *net)
{
	return net_tag(NET_TAG_BARRIER, net->comm_id, 0, 0xffff, 0, NET_TAG_MAX_SEQ);
}

static enum nproxy_status post_recv(struct nproxy_net *net)
{
	struct net_abort *ab = net->abort;
	ssize_t rc;

	rc = fi_trecv(net->ep, &ab->msgs[0], sizeof(ab->msgs[0]), net->mrs[ab->mr].desc,
		      FI_ADDR_UNSPEC, abort_tag(net), 0, &ab->recv.ctx);
	if (rc == -FI_EAGAIN)
		return NPROXY_SUCCESS;	/* posted again on the next drain */
	if (rc)
		return npx_net_post_error(net, rc, "abort: receive from any", net->rank);
	ab->recv.posted = 1;
	return NPROXY_SUCCESS;
}

enum nproxy_status npx_net_abort_init(struct nproxy_net *net)
{
	struct net_abort *ab = calloc(1, sizeof(*ab));
	enum nproxy_status st = NPROXY_RESOURCE;

	if (!ab)
		return st;
	ab->seen = calloc(net->n_ranks, 1);
	/* FI_MR_ALLOCATED: registered memory is real heap memory. */
	ab->msgs = calloc(1 + ABORT_SLOTS, sizeof(*ab->msgs));
	if (!ab->seen || !ab->msgs)
		goto fail;
	st = npx_net_mr_register_locked(net, ab->msgs, (1 + ABORT_SLOTS) * sizeof(*ab->msgs),
					&ab->mr);
	if (st != NPROXY_SUCCESS)
		goto fail;
	ab->recv.kind = NET_REQ_ABORT;
	for (uint32_t i = 0; i < ABORT_SLOTS; i++) {
		ab->send[i].kind = NET_REQ_ABORT;
		ab->send[i].is_send = 1;
	}
	net->abort = ab;
	if (net->n_ranks > 1)
		return post_recv(net);
	return NPROXY_SUCCESS;
fail:
	free(ab->seen);
	free(ab->msgs);
	free(ab);
	return st;
}

void npx_net_abort_cancel(struct nproxy_net *net)
{
	struct net_abort *ab = net->abort;

	if (!ab)
		return;
	if (ab->recv.posted)
		fi_cancel(&net->ep->fid, &ab->recv.ctx);
	for (uint32_t i = 0; i < ABORT_SLOTS; i++) {
		if (ab->send[i].posted)
			fi_cancel(&net->ep->fid, &ab->send[i].ctx);
		ab->queued[i] = 0;	/* never to be posted now */
	}
}

void npx_net_abort_free(struct nproxy_net *net)
{
	if (!net->abort)
		return;
	free(net->abort->seen);
	free(net->abort->msgs);
	free(net->abort);
	net->abort = NULL;
}

/* The peer's address as this rank's provider prints it ("?" if unknown). */
void npx_net_peer_host(struct nproxy_net *net, uint32_t peer, char *buf, size_t len)
{
	char name[256], str[128];
	size_t nlen = sizeof(name), slen = sizeof(str);

	snprintf(buf, len, "?");
	if (peer >= net->n_ranks || !net->av ||
	    fi_av_lookup(net->av, net->peers[peer], name, &nlen) || nlen > sizeof(name))
		return;
	if (!fi_av_straddr(net->av, name, str, &slen))
		return;
	str[sizeof(str) - 1] = 0;
	snprintf(buf, len, "%.*s", (int)(len > 1 ? len - 1 : 0), str);
}

static void send_subtree(struct nproxy_net *net, const struct net_abort_msg *m, uint32_t d);

/* Post slot i (its message to its peer); false when it is to be tried again. */
static bool post_slot(struct nproxy_net *net, uint32_t i)
{
	struct net_abort *ab = net->abort;
	ssize_t rc;

	rc = fi_tsend(net->ep, &ab->msgs[1 + i], sizeof(ab->msgs[1 + i]), net->mrs[ab->mr].desc,
		      net->peers[ab->send[i].peer], abort_tag(net), &ab->send[i].ctx);
	if (rc == 0) {
		ab->send[i].posted = 1;
		return true;
	}
	if (rc == -FI_EAGAIN)
		return false;
	nproxy_log(NPROXY_LOG_WARN, "net rank %u: abort: send to rank %u: %s",
		   net->rank, ab->send[i].peer, fi_strerror((int)-rc));
	return true;
}

/* Send m to rank `to`, at distance d from the origin in its tree. */
static void send_one(struct nproxy_net *net, const struct net_abort_msg *m, uint32_t to,
		     uint32_t d)
{
	struct net_abort *ab = net->abort;

	for (uint32_t i = 0; i < ABORT_SLOTS; i++) {
		if (ab->send[i].posted || ab->queued[i])
			continue;
		ab->msgs[1 + i] = *m;
		ab->send[i].peer = to;
		ab->queued_d[i] = d;
		ab->queued[i] = !post_slot(net, i);
		return;
	}
	nproxy_log(NPROXY_LOG_WARN, "net rank %u: abort: no free send slot for rank %u",
		   net->rank, to);
}

/* Send m to the subtree rooted at distance d from its origin (not to d's parent). */
static void send_subtree(struct nproxy_net *net, const struct net_abort_msg *m, uint32_t d)
{
	uint32_t n = net->n_ranks, to = (m->origin + d) % n;

	if (to != m->dead && !npx_net_in_process_closed(net, to)) {
		send_one(net, m, to, d);
		return;
	}
	/* The dead rank (or a closed one of this process) cannot forward:
	 * its children are sent to here. */
	for (uint64_t step = 1; d + step < n; step <<= 1)
		if (step > d)
			send_subtree(net, m, d + (uint32_t)step);
}

/* The sends that met -FI_EAGAIN, once more.  net->lock held. */
static void retry_queued(struct nproxy_net *net)
{
	struct net_abort *ab = net->abort;
	struct net_abort_msg m;

	/* Called on every poll: the process-wide lock only when there is work. */
	if (!memchr(ab->queued, 1, sizeof(ab->queued)))
		return;
	npx_net_in_process_lock();
	for (uint32_t i = 0; i < ABORT_SLOTS; i++) {
		if (!ab->queued[i])
			continue;
		if (!npx_net_in_process_closed(net, ab->send[i].peer)) {
			ab->queued[i] = !post_slot(net, i);
			continue;
		}
		/* Closed since: its children are sent to here, as in send_subtree. */
		ab->queued[i] = 0;
		m = ab->msgs[1 + i];
		for (uint64_t step = 1; ab->queued_d[i] + step < net->n_ranks; step <<= 1)
			if (step > ab->queued_d[i])
				send_subtree(net, &m, ab->queued_d[i] + (uint32_t)step);
	}
	npx_net_in_process_unlock();
}

/* Forward m to this rank's children in the origin's tree. */
static void forward(struct nproxy_net *net, const struct net_abort_msg *m)
{
	uint32_t n = net->n_ranks, d = (net->rank + n - m->origin) % n;

	/* An in-process peer cannot close its endpoint while we send to it. */
	npx_net_in_process_lock();
	for (uint64_t step = 1; d + step < n; step <<= 1)
		if (step > d)
			send_subtree(net, m, d + (uint32_t)step);
	npx_net_in_process_unlock();
}

static void take(struct nproxy_net *net, const struct net_abort_msg *m)
{
	struct net_abort *ab = net->abort;

	if (m->magic != ABORT_MAGIC || m->origin >= net->n_ranks || m->dead >= net->n_ranks) {
		nproxy_log(NPROXY_LOG_WARN, "net rank %u: ignored a malformed abort message",
			   net->rank);
		return;
	}
	if (ab->seen[m->origin])
		return;
	ab->seen[m->origin] = 1;
	if (!__atomic_load_n(&ab->have_reason, __ATOMIC_RELAXED)) {
		char pid[24] = "";

		if (m->pid > 0)
			snprintf(pid, sizeof(pid), "pid %d, ", (int)m->pid);
		snprintf(ab->reason, sizeof(ab->reason), "rank %u (%shost %.64s) %.176s (reported by rank %u)",
			 m->dead, pid, m->host, m->text, m->origin);
		/* After the text: nproxy_net_abort_reason() reads without the lock. */
		__atomic_store_n(&ab->have_reason, true, __ATOMIC_RELEASE);
		npx_net_set_err(net, "%s", ab->reason);
		npx_net_fail(net, NPROXY_PEER_DEAD);
	}
	forward(net, m);
}

void npx_net_abort_complete(struct nproxy_net *net, struct net_req *req, bool ok)
{
	struct net_abort *ab = net->abort;

	req->posted = 0;
	if (req->is_send || !ab)
		return;
	if (ok)
		take(net, &ab->msgs[0]);
	/* Keep one receive posted (a cancelled one only at close). */
	if (ok)
		post_recv(net);
}

/* net->lock held. */
void npx_net_abort_locked(struct nproxy_net *net, uint32_t dead, int pid, const char *why)
{
	struct net_abort *ab = net->abort;
	struct net_abort_msg m = { .magic = ABORT_MAGIC, .origin = net->rank, .dead = dead,
				   .pid = pid };

	if (!ab || dead >= net->n_ranks || ab->seen[net->rank])
		return;
	npx_net_peer_host(net, dead, m.host, sizeof(m.host));
	snprintf(m.text, sizeof(m.text), "%s", why && *why ? why : "died");
	/* This rank's own view is its reason, unless another's came first. */
	take(net, &m);
}

bool npx_net_abort_sending(struct nproxy_net *net)
{
	for (uint32_t i = 0; net->abort && i < ABORT_SLOTS; i++)
		if (net->abort->send[i].posted || net->abort->queued[i])
			return true;
	return false;
}

void npx_net_abort_repost(struct nproxy_net *net)
{
	if (!net->abort)
		return;
	if (!net->abort->recv.posted && net->n_ranks > 1)
		post_recv(net);
	retry_queued(net);
}

NPROXY_API const char *nproxy_net_abort_reason(const struct nproxy_net *net)
{
	/* Written once, under net->lock, then published (take()). */
	return net && net->abort && __atomic_load_n(&net->abort->have_reason, __ATOMIC_ACQUIRE) ?
	       net->abort->reason : "";
}
