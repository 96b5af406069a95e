// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone waiting: every rank sleeps on its own futex word ("bell") in
 * the segment, so one FUTEX_WAIT covers everything a collective may wait
 * for at once (any peer's ring, space in its own ring, a barrier).
 *
 * Waiter:   bell0 = bell; wait_for = w; sleeping = 1; re-check; FUTEX_WAIT(bell, bell0)
 * Notifier: publish (seq_cst); if (sleeping && wait_for matches) { bell++; FUTEX_WAKE }
 *
 * Both sides store then load with sequentially consistent atomics, so
 * either the notifier sees sleeping == 1 and rings the bell (the FUTEX_WAIT
 * then returns at once), or the waiter's re-check sees the publication:
 * no wakeup is lost, and a notifier makes no syscall while nobody sleeps.
 * Before sleeping a waiter may spin (pinned, ranks <= cpus) and then
 * yields the cpu a couple of times.
 * Sleeps last at most BP_WAIT_SLICE_MS so that the watched pidfds and the
 * segment's death notice are polled often enough to turn a death into an
 * error within ~2 slices.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include "bananaphone_internal.h"

/* Shared (not FUTEX_PRIVATE): the word lives in a MAP_SHARED memfd. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};

	syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * Wake `target` if it sleeps waiting for `source` (a rank), for anything
 * (BP_WAIT_ANY), or unconditionally when source == BP_WAIT_ANY.
 */
void npx_bp_notify(struct nproxy_bp *bp, uint32_t target, uint32_t source)
{
	struct npx_bp_rank_ctl *rc = npx_bp_rank_ctl(bp, target);
	uint32_t wf;

	if (!atomic_load(&rc->sleeping))
		return;
	wf = atomic_load(&rc->wait_for);
	if (source != BP_WAIT_ANY && wf != source && wf != BP_WAIT_ANY)
		return;
	atomic_fetch_add(&rc->bell, 1);
	futex_wake(&rc->bell);
}

/* force: wake every sleeper whatever it waits for (hangup, barrier). */
void npx_bp_notify_all(struct nproxy_bp *bp, bool force)
{
	uint32_t r;

	for (r = 0; r < bp->n; r++)
		if (r != bp->rank)
			npx_bp_notify(bp, r, force ? BP_WAIT_ANY : bp->rank);
}

/*
 * Rate-limited duties of every wait loop (force: now): the leader answers
 * latecomers of a complete job, and every rank polls its peers' pidfds.
 */
enum nproxy_status npx_bp_check_live(struct nproxy_bp *bp, bool force)
{
	uint64_t now = npx_now_ns();

	if (!force && now < bp->next_live_check_ns)
		return NPROXY_SUCCESS;
	bp->next_live_check_ns = now + BP_WAIT_SLICE_MS * 1000000ull;
	if (bp->leader && bp->state == BP_S_READY)
		npx_bp_refuse_late(bp);
	return npx_bp_check_dead(bp);
}

/* A peer hung up (step error PEER_LEFT): a death elsewhere is the root cause. */
static enum nproxy_status step_failed(struct nproxy_bp *bp)
{
	enum nproxy_status st = bp->sticky;

	if (st == NPROXY_PEER_LEFT && npx_bp_check_dead(bp))
		return bp->sticky;
	return st;
}

/*
 * Run `step` until it reports DONE, an error, or the deadline passes.
 * Timeouts are reported with npx_bp_error() (not sticky): the caller decides
 * whether the bus survives them.
 */
enum nproxy_status npx_bp_wait(struct nproxy_bp *bp, bp_step_fn step, void *arg, uint64_t deadline_ns,
			   const char *what)
{
	struct npx_bp_rank_ctl *me = npx_bp_rank_ctl(bp, bp->rank);
	uint64_t spin_until = 0, now, left;
	enum nproxy_status st;
	enum bp_step s;
	uint32_t wf = BP_WAIT_ANY;
	int yields = 0;

	for (;;) {
		uint32_t bell = atomic_load(&me->bell);

		s = step(bp, arg, &wf);
		if (s == BP_STEP_ERROR)
			return step_failed(bp);
		if (s == BP_STEP_DONE)
			return NPROXY_SUCCESS;
		if (s == BP_STEP_MOVED) {
			spin_until = 0;
			yields = 0;
			continue;
		}
		now = npx_now_ns();
		if (now >= deadline_ns) {
			bp->want_watch = wf;
			st = npx_bp_check_live(bp, true);
			if (st)
				return st;
			if (wf != BP_WAIT_ANY)
				return npx_bp_error(bp, NPROXY_TIMEOUT,
						"%s timed out waiting for rank %u (pid %d)",
						what, wf, (int)bp->pids[wf]);
			return npx_bp_error(bp, NPROXY_TIMEOUT,
					"%s timed out waiting for its readers to make room", what);
		}
		bp->want_watch = wf;
		st = npx_bp_check_live(bp, false);
		if (st)
			return st;
		if (bp->spin_ns) {
			if (!spin_until)
				spin_until = now + bp->spin_ns;
			if (now < spin_until) {
				wake_cpu_relax();
				continue;
			}
		}
		/* More ranks than cpus: the peer we wait for is often runnable
		 * on this very cpu; handing it the cpu beats a sleep/wake pair
		 * (measured: half the median latency at 4 and 8 ranks on 2). */
		if (yields < bp->yields) {
			yields++;
			sched_yield();
			continue;
		}
		atomic_store(&me->wait_for, wf);
		atomic_store(&me->sleeping, 1);
		s = step(bp, arg, &wf);
		if (s == BP_STEP_IDLE) {
			left = deadline_ns - now;
			if (left > BP_WAIT_SLICE_MS * 1000000ull)
				left = BP_WAIT_SLICE_MS * 1000000ull;
			futex_wait(&me->bell, bell, left);
		}
		atomic_store(&me->sleeping, 0);
		if (s == BP_STEP_ERROR)
			return step_failed(bp);
		if (s == BP_STEP_DONE)
			return NPROXY_SUCCESS;
		spin_until = 0;
		yields = 0;
	}
}
