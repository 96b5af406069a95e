// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The host barrier the rank hands to its comm's barrier tasks: the
 * engine's (nproxy_net_host_barrier), with one way round it.
 *
 * The rank's collective handle (lib/coll) may defer the barrier of each op
 * it launches, and decides it when it starts the next op:
 *
 *   ride  the next op is an allgather or an allreduce across the ranks.
 *         Every rank sends that op's data only after its wait for this op
 *         returned, and every rank's result of it needs every rank's data,
 *         so once this rank's receives of the next op are all in (the
 *         completion semaphore it gives reaches its value) every rank is
 *         past this op: the barrier is complete, and no barrier message
 *         crosses the network.
 *   run   anything else (a sendrecv, a custom op, an op with no data, the
 *         handle's close): the barrier runs on the engine.
 *
 * Each rank's handle decides from the op sequence, which is the same on
 * every rank, so the ranks run the same engine barriers, numbered from 1
 * in the order they run (engine_seq), whatever the proxy's numbers are.
 *
 * A deferred barrier is matched to the proxy's by order: the handle marks
 * one before it enqueues its op, and the next barrier task to arrive is
 * that op's (barrier tasks arrive in sequence, one at a time: a task
 * arrives only after the one before it is done).  A barrier that arrives
 * with no mark waiting (a task of a runtime's own, beside the handle) runs
 * on the engine at once.  Until it is decided, test() answers NPROXY_BUSY:
 * nothing the group's thread polls can change it, and the decision kicks
 * the group (nproxy_comm_kick()), unless an enqueue that wakes it anyway
 * follows at once (kick false: one wake-up per op, not two).
 *
 * Called by the group's stepping thread (arrive, test) and by the handle's
 * thread (the rest), under the barrier's own lock; the engine's calls do
 * not block.
 */
#include <string.h>
#include <nproxy/handshake.h>
#include "rank_internal.h"

static enum nproxy_status engine_arrive(struct npx_rank_barrier *b)
{
	b->cur_engine_seq = ++b->engine_seq;
	return b->engine.ops->arrive(b->engine.ctx, b->cur_engine_seq);
}

static enum nproxy_status barrier_arrive(void *ctx, uint64_t seq)
{
	struct npx_rank_barrier *b = ctx;
	enum nproxy_status st = NPROXY_SUCCESS;

	pthread_mutex_lock(&b->lock);
	b->cur_seq = seq;
	b->cur_engine_seq = 0;
	b->cur_ordinal = b->bound < b->marked ? ++b->bound : 0;
	if (!b->cur_ordinal)
		st = engine_arrive(b);
	pthread_mutex_unlock(&b->lock);
	return st;
}

/*
 * The deferred barrier that arrived last: done, run now, or BUSY (not
 * decided, or carried and the op's data not all in).  A carried barrier is
 * BUSY too: its semaphore moves only when the group's own step of the next
 * op's network task posts it, and a tick that made progress is always
 * followed by another (<nproxy/seam.h>), so the group need not poll it
 * while that op waits for its device trigger.
 */
static enum nproxy_status test_deferred(struct npx_rank_barrier *b, bool *done)
{
	const struct npx_rank_barrier_decision *d =
		&b->decisions[b->cur_ordinal % RANK_BARRIER_DECISIONS];

	if (d->ordinal != b->cur_ordinal)	/* not decided */
		return b->owned ? NPROXY_BUSY : engine_arrive(b);
	if (!d->ride_sem)
		return engine_arrive(b);
	*done = nproxy_sem_load(d->ride_sem) >= d->ride_value;
	return *done ? NPROXY_SUCCESS : NPROXY_BUSY;
}

static enum nproxy_status barrier_test(void *ctx, uint64_t seq, bool *done)
{
	struct npx_rank_barrier *b = ctx;
	enum nproxy_status st = NPROXY_SUCCESS;

	*done = false;
	pthread_mutex_lock(&b->lock);
	if (seq != b->cur_seq)
		st = NPROXY_INVALID;	/* only the barrier that arrived last is tested */
	else if (!b->cur_engine_seq)
		st = test_deferred(b, done);
	if (st == NPROXY_SUCCESS && b->cur_engine_seq)
		st = b->engine.ops->test(b->engine.ctx, b->cur_engine_seq, done);
	pthread_mutex_unlock(&b->lock);
	return st;
}

static const struct nproxy_host_barrier_ops rank_barrier_ops = {
	.name = "rank (the engine's, or carried by the next op's data)",
	.arrive = barrier_arrive,
	.test = barrier_test,
};

void npx_rank_barrier_init(struct npx_rank_barrier *b, const struct nproxy_host_barrier *engine,
			   struct nproxy_host_barrier *out)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	b->ready = true;
	b->engine = *engine;
	*out = engine->ops ? (struct nproxy_host_barrier){ .ops = &rank_barrier_ops, .ctx = b } :
			     *engine;
}

void npx_rank_barrier_destroy(struct npx_rank_barrier *b)
{
	if (b->ready)
		pthread_mutex_destroy(&b->lock);
	b->ready = false;
}

bool npx_rank_barrier_claim(struct nproxy_rank *r)
{
	struct npx_rank_barrier *b = &r->barrier;
	bool mine;

	/* Ready: a coll opens only on a rank with a comm, whose barrier came first. */
	pthread_mutex_lock(&b->lock);
	mine = b->engine.ops && !b->owned;
	if (mine)
		b->owned = true;
	pthread_mutex_unlock(&b->lock);
	return mine;
}

void npx_rank_barrier_release(struct nproxy_rank *r)
{
	struct npx_rank_barrier *b = &r->barrier;

	pthread_mutex_lock(&b->lock);
	b->owned = false;	/* nothing stays deferred without an owner: it runs */
	b->bound = b->marked;
	pthread_mutex_unlock(&b->lock);
	nproxy_comm_kick(r->comm);
}

uint64_t npx_rank_barrier_mark(struct nproxy_rank *r)
{
	struct npx_rank_barrier *b = &r->barrier;
	uint64_t ordinal;

	pthread_mutex_lock(&b->lock);
	ordinal = ++b->marked;
	pthread_mutex_unlock(&b->lock);
	return ordinal;
}

void npx_rank_barrier_unmark(struct nproxy_rank *r, uint64_t ordinal)
{
	struct npx_rank_barrier *b = &r->barrier;

	pthread_mutex_lock(&b->lock);
	if (b->marked == ordinal && b->bound < ordinal)
		b->marked--;
	pthread_mutex_unlock(&b->lock);
}

void npx_rank_barrier_decide(struct nproxy_rank *r, uint64_t ordinal,
			     const volatile uint64_t *ride_sem, uint64_t ride_value, bool kick)
{
	struct npx_rank_barrier *b = &r->barrier;

	pthread_mutex_lock(&b->lock);
	/* Decided again: the op that was to carry it never launched. */
	b->decisions[ordinal % RANK_BARRIER_DECISIONS] = (struct npx_rank_barrier_decision){
		.ordinal = ordinal, .ride_sem = ride_sem, .ride_value = ride_value };
	pthread_mutex_unlock(&b->lock);
	if (kick)
		nproxy_comm_kick(r->comm);
}
