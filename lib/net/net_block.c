// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The engine's memory: blocks of op state, retired ones kept for the next
 * start() (no malloc per block), and start()'s scratch counters.  A leaf:
 * the engine takes and returns blocks, the CQ frees a retired block when
 * its last cancelled op comes back.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "net_internal.h"

#define NET_SPARE_BLOCKS	16	/* retired blocks kept for reuse */

/* Grow *p to n elements of size (never shrinks); false when out of memory. */
static bool grow(void **p, uint32_t *cap, uint32_t n, size_t size)
{
	void *q;

	if (n <= *cap)
		return true;
	q = realloc(*p, (size_t)n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static void block_destroy(struct net_block *b)
{
	free(b->st);
	free(b->sem_head);
	free(b->next_same_sem);
	free(b);
}

/*
 * A block for start(): a spare one (its arrays kept, grown if this block
 * is bigger) or a new one.  Everything but the arrays is zeroed, and the
 * op states too.  Called with net->lock held.
 */
struct net_block *npx_net_block_get(struct nproxy_net *net, uint32_t n_ops, uint32_t n_sems)
{
	struct net_block *b = net->spare, kept;
	uint32_t ops = n_ops ? n_ops : 1;

	if (b) {
		net->spare = b->next_grave;
		net->n_spare--;
	} else if (!(b = calloc(1, sizeof(*b)))) {
		return NULL;
	}
	kept = *b;
	memset(b, 0, sizeof(*b));
	b->st = kept.st;
	b->next_same_sem = kept.next_same_sem;
	b->sem_head = kept.sem_head;
	b->cap_ops = kept.cap_ops;
	b->cap_next = kept.cap_next;
	b->cap_sems = kept.cap_sems;
	if (!grow((void **)&b->st, &b->cap_ops, ops, sizeof(*b->st)) ||
	    !grow((void **)&b->next_same_sem, &b->cap_next, ops, sizeof(uint32_t)) ||
	    !grow((void **)&b->sem_head, &b->cap_sems, n_sems, sizeof(uint32_t))) {
		block_destroy(b);
		return NULL;
	}
	memset(b->st, 0, (size_t)ops * sizeof(*b->st));
	return b;
}

/* start()'s scratch array of n counters (net->lock held). */
uint32_t *npx_net_start_scratch(struct nproxy_net *net, uint32_t n)
{
	return grow((void **)&net->start_scratch, &net->cap_scratch, n, sizeof(uint32_t)) ?
	       net->start_scratch : NULL;
}

/* Keep a retired block for the next start(), up to NET_SPARE_BLOCKS. */
void npx_net_block_free(struct nproxy_net *net, struct net_block *b)
{
	if (net->n_spare >= NET_SPARE_BLOCKS) {
		block_destroy(b);
		return;
	}
	b->next_grave = net->spare;
	net->spare = b;
	net->n_spare++;
}

void npx_net_engine_free(struct nproxy_net *net)
{
	while (net->graveyard) {
		struct net_block *b = net->graveyard;

		net->graveyard = b->next_grave;
		block_destroy(b);
	}
	while (net->spare) {
		struct net_block *b = net->spare;

		net->spare = b->next_grave;
		block_destroy(b);
	}
	net->n_spare = 0;
	free(net->start_scratch);
	net->start_scratch = NULL;
}

void npx_net_block_free_if_reaped(struct nproxy_net *net, struct net_block *b)
{
	struct net_block **pp;

	if (!b->retired || b->n_inflight)
		return;
	for (pp = &net->graveyard; *pp; pp = &(*pp)->next_grave) {
		if (*pp == b) {
			*pp = b->next_grave;
			npx_net_block_free(net, b);
			return;
		}
	}
}
