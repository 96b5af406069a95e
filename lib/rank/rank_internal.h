/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: the rank subsystem (one rank of a job in one call).
 * It sits above every other subsystem and reaches them through their
 * public headers only.
 */
#ifndef NPX_RANK_INTERNAL_H
#define NPX_RANK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <nproxy/bananaphone.h>
#include <nproxy/proxy.h>
#include "common/common_internal.h"

/*
 * The comm's host barrier: the engine's, or deferred by the rank's
 * collective handle and then run or ridden (rank_barrier.c).  Ordinals
 * count the handle's marks (1, 2, ...), engine_seq the engine's barriers.
 */
#define RANK_BARRIER_DECISIONS	4

struct npx_rank_barrier {
	pthread_mutex_t lock;
	bool ready;			/* lock initialised (npx_rank_barrier_init) */
	struct nproxy_host_barrier engine;
	bool owned;			/* a handle defers this rank's barriers */
	uint64_t marked;		/* barriers the handle marked to defer */
	uint64_t bound;			/* of those, arrived at */
	/*
	 * Decisions, by ordinal % RANK_BARRIER_DECISIONS (a handle keeps at
	 * most two barriers uncollected): done once *ride_sem reaches
	 * ride_value, or (ride_sem NULL) run on the engine.
	 */
	struct npx_rank_barrier_decision {
		uint64_t ordinal;	/* 0: none */
		const volatile uint64_t *ride_sem;
		uint64_t ride_value;
	} decisions[RANK_BARRIER_DECISIONS];
	uint64_t engine_seq;		/* engine barriers entered */
	uint64_t cur_seq;		/* the proxy's number of the barrier that arrived last */
	uint64_t cur_ordinal;		/* its mark (0: not deferred) */
	uint64_t cur_engine_seq;	/* its engine barrier (0: none yet) */
};

void npx_rank_barrier_init(struct npx_rank_barrier *b, const struct nproxy_host_barrier *engine,
			   struct nproxy_host_barrier *out);
void npx_rank_barrier_destroy(struct npx_rank_barrier *b);

struct nproxy_rank {
	uint32_t rank, n_ranks;
	uint32_t local_size;		/* ranks on this host (the bus's size) */
	uint32_t gid;			/* the proxy group this rank's comm joins */
	uint32_t open_timeout_ms;
	uint64_t deadline_ms;		/* CLOCK_MONOTONIC: end of the open */
	enum nproxy_idle_policy idle_policy;
	/* Local (bus) rank -> rank in the job, from the exchange at open. */
	uint32_t bus_to_rank[NPROXY_BP_MAX_RANKS];

	struct nproxy_bp *bp;			/* NULL when this host runs one rank */
	struct nproxy_net *net;
	struct nproxy_hs *hs;
	struct nproxy_comm *comm;
	struct npx_rank_barrier barrier;	/* the comm's host barrier */
	/* The dead peer's held shm locks were looked for (once per rank). */
	bool dead_locks_freed;

	struct npx_errbuf err;		/* which step failed and why (common's rule) */
};

/*
 * For lib/coll, which owns a rank's barriers while a handle is open: claim
 * (false: another handle has them, or there is no engine barrier), mark one
 * before enqueueing an op (its ordinal), unmark it when the enqueue failed,
 * decide it when the next op starts (ride: complete once *ride_sem reaches
 * ride_value; ride_sem NULL: run on the engine) or the handle closes (run),
 * release at close.
 */
bool npx_rank_barrier_claim(struct nproxy_rank *r);
void npx_rank_barrier_release(struct nproxy_rank *r);
uint64_t npx_rank_barrier_mark(struct nproxy_rank *r);
void npx_rank_barrier_unmark(struct nproxy_rank *r, uint64_t ordinal);
void npx_rank_barrier_decide(struct nproxy_rank *r, uint64_t ordinal,
			     const volatile uint64_t *ride_sem, uint64_t ride_value, bool kick);

#endif
