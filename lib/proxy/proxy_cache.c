// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Per-comm caches of the objects every op needs: two status objects, a
 * network task and a barrier task.  A comm issues its ops one after the
 * other and recycles them as they finish, so in steady state enqueue takes
 * its objects from here and DONE puts them back: no malloc or free per op.
 * A cache holds at most PROXY_CACHE_MAX objects of a kind (a burst of ops in
 * flight allocates the rest and frees them when they finish).
 *
 * Objects are put back by the worker (tasks, and statuses whose last
 * reference was the task's) and by consumers (statuses), and taken by
 * producers: one short, uncontended lock per operation, no system call.
 */
#include <stdlib.h>
#include <string.h>
#include "proxy_internal.h"

#define PROXY_CACHE_MAX	8

struct proxy_cached {
	struct proxy_cached *next;
};

void *npx_proxy_cache_get(struct nproxy_comm *comm, enum proxy_cache_kind kind)
{
	struct proxy_cache *c = &comm->cache[kind];
	struct proxy_cached *obj;

	pthread_mutex_lock(&comm->cache_lock);
	obj = c->head;
	if (obj) {
		c->head = obj->next;
		c->count--;
	}
	pthread_mutex_unlock(&comm->cache_lock);
	return obj;
}

bool npx_proxy_cache_put(struct nproxy_comm *comm, enum proxy_cache_kind kind, void *p)
{
	struct proxy_cache *c = &comm->cache[kind];
	struct proxy_cached *obj = p;
	bool kept = false;

	pthread_mutex_lock(&comm->cache_lock);
	if (c->count < PROXY_CACHE_MAX) {
		obj->next = c->head;
		c->head = obj;
		c->count++;
		kept = true;
	}
	pthread_mutex_unlock(&comm->cache_lock);
	return kept;
}

void npx_proxy_cache_drain(struct nproxy_comm *comm, enum proxy_cache_kind kind,
		       void (*release)(void *obj))
{
	struct proxy_cache *c = &comm->cache[kind];
	struct proxy_cached *obj, *next;

	pthread_mutex_lock(&comm->cache_lock);
	obj = c->head;
	c->head = NULL;
	c->count = 0;
	pthread_mutex_unlock(&comm->cache_lock);
	for (; obj; obj = next) {
		next = obj->next;
		release(obj);
	}
}
