// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone barrier: no messages, one counter per rank.  Entering
 * barrier #seq stores seq into the rank's barrier_arrived word; the
 * barrier is complete when every rank's word is >= seq.  Whoever completes
 * it (its store is the last in the total order of these seq_cst stores, so
 * its loads see everyone) wakes all sleepers, so waiters are woken once per
 * barrier, not once per arrival.  nproxy_bp_barrier_arrive()/nproxy_bp_barrier_test()
 * are the same two halves without sleeping.
 */
#include "bananaphone_internal.h"

void npx_bp_barrier_publish(struct nproxy_bp *bp, uint64_t seq)
{
	uint32_t r;

	atomic_store(&npx_bp_rank_ctl(bp, bp->rank)->barrier_arrived, seq);
	bp->barrier_published = seq;
	for (r = 0; r < bp->n; r++)
		if (atomic_load(&npx_bp_rank_ctl(bp, r)->barrier_arrived) < seq)
			return;
	npx_bp_notify_all(bp, true);
}

enum bp_step npx_bp_barrier_check(struct nproxy_bp *bp, uint64_t seq, uint32_t *wait_for)
{
	enum bp_step step = BP_STEP_DONE;
	uint32_t r;

	/* Scan everyone: a rank that hung up without arriving is reported even
	 * when an earlier rank is merely late. */
	for (r = 0; r < bp->n; r++) {
		struct npx_bp_rank_ctl *rc = npx_bp_rank_ctl(bp, r);

		if (atomic_load(&rc->barrier_arrived) >= seq)
			continue;
		if (atomic_load(&rc->left) && atomic_load(&rc->barrier_arrived) < seq) {
			npx_bp_fail(bp, NPROXY_PEER_LEFT,
				"rank %u (pid %d) hung up before barrier #%llu",
				r, (int)bp->pids[r], (unsigned long long)seq);
			return BP_STEP_ERROR;
		}
		if (step == BP_STEP_DONE)
			*wait_for = r;
		step = BP_STEP_IDLE;
	}
	return step;
}
