// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The engines of one job that live in this process.  libfabric's shm
 * provider reaches a peer endpoint of the same process through that
 * endpoint's own region, not a mapping of its own: once the peer's
 * endpoint is closed, a send to it touches freed memory.  Ranks of one
 * process close in parallel (nproxy-run closes its local ranks on a thread
 * each), and a rank that abandons its job still sends the cross-host abort
 * (net_abort.c) to whoever is in its tree, an in-process peer included.
 * So every engine is listed here from open to free, keyed by (comm_id,
 * rank); a closing one is marked under the lock before its endpoint goes,
 * and abort sends are made under the same lock to peers not marked.  The
 * entries of a job go when its last engine in the process is freed.
 */
#include <stdlib.h>
#include "net_internal.h"

struct in_process_engine {
	uint32_t comm_id, rank;
	bool closing;
	const struct nproxy_net *net;
	struct in_process_engine *next;
};

static pthread_mutex_t in_process_lock = PTHREAD_MUTEX_INITIALIZER;
static struct in_process_engine *in_process_head;

void npx_net_in_process_add(const struct nproxy_net *net)
{
	struct in_process_engine *e = calloc(1, sizeof(*e));

	/* Without an entry the peer is sent to as one in another process. */
	if (!e)
		return;
	*e = (struct in_process_engine){ .comm_id = net->comm_id, .rank = net->rank, .net = net };
	pthread_mutex_lock(&in_process_lock);
	e->next = in_process_head;
	in_process_head = e;
	pthread_mutex_unlock(&in_process_lock);
}

void npx_net_in_process_closing(const struct nproxy_net *net)
{
	pthread_mutex_lock(&in_process_lock);
	for (struct in_process_engine *e = in_process_head; e; e = e->next)
		if (e->net == net)
			e->closing = true;
	pthread_mutex_unlock(&in_process_lock);
}

void npx_net_in_process_remove(const struct nproxy_net *net)
{
	struct in_process_engine **pp, *e;
	bool job_open = false;

	pthread_mutex_lock(&in_process_lock);
	for (e = in_process_head; e; e = e->next) {
		if (e->net == net) {
			e->closing = true;
			e->net = NULL;	/* the memory may come back as another engine */
		} else if (e->comm_id == net->comm_id && !e->closing) {
			job_open = true;
		}
	}
	/* A closed peer stays listed while an engine of its job may still send. */
	for (pp = &in_process_head; (e = *pp);) {
		if (!job_open && e->comm_id == net->comm_id && e->closing) {
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&in_process_lock);
}

void npx_net_in_process_lock(void)
{
	pthread_mutex_lock(&in_process_lock);
}

void npx_net_in_process_unlock(void)
{
	pthread_mutex_unlock(&in_process_lock);
}

bool npx_net_in_process_closed(const struct nproxy_net *net, uint32_t peer)
{
	for (const struct in_process_engine *e = in_process_head; e; e = e->next)
		if (e->comm_id == net->comm_id && e->rank == peer && e->net != net)
			return e->closing;
	return false;
}
