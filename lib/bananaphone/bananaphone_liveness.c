// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone liveness, polled (never waited on) from every wait loop at
 * most every BP_WAIT_SLICE_MS.  The leader holds a pidfd for every other
 * process on the bus; a follower holds the leader's and, while it waits,
 * the one of the rank it waits for.  A peer whose pidfd is readable has
 * exited; if it set its "left" flag first it hung up in an orderly way,
 * otherwise it died and the bus is broken (NPROXY_PEER_DEAD, naming rank
 * and pid).  Whoever sees a death posts it in the segment (ctl->dead), so
 * ranks that do not watch the dead one learn of it within a slice.  File descriptors: O(processes) on the leader, O(1) on
 * a follower, so a host of 64 ranks stays far below `ulimit -n 1024`.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "bananaphone_internal.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Called directly: glibc 2.36 has the wrapper, older ones do not. */
int npx_bp_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

void nproxy_bp_abandon(struct nproxy_bp *bp, uint32_t dead_rank)
{
	uint32_t none = 0;

	if (!bp || !bp->ctl || dead_rank >= bp->n || dead_rank == bp->rank)
		return;
	atomic_compare_exchange_strong(&npx_bp_rank_ctl(bp, bp->rank)->saw_dead, &none,
				       dead_rank + 1);
}

uint32_t nproxy_bp_blame(const struct nproxy_bp *bp, uint32_t gone_rank)
{
	uint32_t s;

	if (!bp || !bp->ctl || gone_rank >= bp->n)
		return gone_rank;
	s = atomic_load(&npx_bp_rank_ctl((struct nproxy_bp *)bp, gone_rank)->saw_dead);
	return s && s - 1 < bp->n ? s - 1 : gone_rank;
}

bool nproxy_bp_dead_peer(const struct nproxy_bp *bp, uint32_t *rank, int *pid)
{
	uint32_t d = 0;

	if (!bp || !bp->ctl)
		return false;
	d = atomic_load(&npx_bp_rank_ctl((struct nproxy_bp *)bp, bp->rank)->saw_dead);
	if (!d)
		d = atomic_load(&bp->ctl->dead);
	if (!d || d - 1 >= bp->n || d - 1 == bp->rank)
		return false;
	*rank = d - 1;
	*pid = (int)bp->pids[d - 1];
	return true;
}

/*
 * Post a death in the segment for the ranks that do not watch the dead
 * one.  No bell is rung: every sleeper wakes within BP_WAIT_SLICE_MS and
 * reads the notice then.
 */
static void announce(struct nproxy_bp *bp, uint32_t dead)
{
	uint32_t none = 0;

	if (bp->ctl)
		atomic_compare_exchange_strong(&bp->ctl->dead, &none, dead + 1);
}

/*
 * A follower watches the rank its wait waits for (besides the leader):
 * a death there surfaces even while the leader is not inside a bus call.
 * Opened on demand, one at a time; never for a rank of this process.
 */
static void update_watch(struct nproxy_bp *bp)
{
	uint32_t want = bp->want_watch;

	if (bp->leader || want == bp->watch_rank)
		return;
	if (bp->watch_fd >= 0)
		close(bp->watch_fd);
	bp->watch_fd = -1;
	bp->watch_rank = BP_WAIT_ANY;
	if (want >= bp->n || want == bp->rank || !bp->pids[want] ||
	    bp->pids[want] == bp->pids[bp->rank] || bp->pids[want] == bp->pids[0])
		return;
	/* EMFILE or a peer already reaped: the leader's notice still covers it. */
	bp->watch_fd = npx_bp_pidfd_open(bp->pids[want]);
	if (bp->watch_fd >= 0)
		bp->watch_rank = want;
}

/*
 * The rank of process `pid` to name as dead: one that did not hang up,
 * or BP_WAIT_ANY when every rank of it did (an orderly exit).  A rank that
 * gave up because it saw another die (nproxy_bp_abandon) is returned only
 * when no rank of the process died on its own; *saw then names the cause.
 */
static uint32_t gone_rank(struct nproxy_bp *bp, pid_t pid, uint32_t *gave_up, uint32_t *saw)
{
	uint32_t q;

	for (q = 0; q < bp->n; q++) {
		uint32_t s = 0;

		if (q == bp->rank || bp->pids[q] != pid)
			continue;
		if (bp->ctl && atomic_load(&npx_bp_rank_ctl(bp, q)->left))
			continue;	/* exited after hanging up: not a death */
		if (bp->ctl)
			s = atomic_load(&npx_bp_rank_ctl(bp, q)->saw_dead);
		if (s && s - 1 < bp->n && s - 1 != bp->rank) {
			if (*gave_up == BP_WAIT_ANY) {
				*gave_up = q;
				*saw = s - 1;
			}
			continue;
		}
		return q;
	}
	return BP_WAIT_ANY;
}

/*
 * Poll the watched pidfds once, and read the segment's death notice; a
 * dead (not hung up) peer breaks the bus.  Several may be gone: a rank
 * that gave up because it saw another die (nproxy_bp_abandon) is not the
 * one to name while a rank that died on its own is among them, and when
 * it is the only one, the rank it saw die is named through it.  Whatever
 * is named is recorded as what made this rank give up, and posted in the
 * segment for the ranks that do not watch it.
 */
enum nproxy_status npx_bp_check_dead(struct nproxy_bp *bp)
{
	struct pollfd pfd[NPROXY_BP_MAX_RANKS + 1];
	uint32_t idx[NPROXY_BP_MAX_RANKS + 1];
	uint32_t r, k = 0, gave_up = BP_WAIT_ANY, saw = 0;
	int n;

	update_watch(bp);
	for (r = 0; r < bp->n; r++) {
		if (bp->pidfds[r] < 0)
			continue;
		pfd[k].fd = bp->pidfds[r];
		pfd[k].events = POLLIN;
		pfd[k].revents = 0;
		idx[k++] = r;
	}
	if (bp->watch_fd >= 0) {
		pfd[k].fd = bp->watch_fd;
		pfd[k].events = POLLIN;
		pfd[k].revents = 0;
		idx[k++] = bp->watch_rank;
	}
	n = k ? poll(pfd, k, 0) : 0;
	for (r = 0; n > 0 && r < k; r++) {
		uint32_t dead;

		if (!(pfd[r].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		dead = gone_rank(bp, bp->pids[idx[r]], &gave_up, &saw);
		if (dead == BP_WAIT_ANY)
			continue;
		nproxy_bp_abandon(bp, dead);
		announce(bp, dead);
		return npx_bp_fail(bp, NPROXY_PEER_DEAD,
			       "rank %u (pid %d) died: it exited or was killed without hanging up",
			       dead, (int)bp->pids[dead]);
	}
	if (gave_up != BP_WAIT_ANY) {
		nproxy_bp_abandon(bp, saw);
		announce(bp, saw);
		return npx_bp_fail(bp, NPROXY_PEER_DEAD,
			       "rank %u (pid %d) died (rank %u, pid %d, saw it and exited)",
			       saw, (int)bp->pids[saw], gave_up, (int)bp->pids[gave_up]);
	}
	if (bp->ctl) {
		uint32_t d = atomic_load(&bp->ctl->dead);

		if (d && d - 1 < bp->n && d - 1 != bp->rank) {
			nproxy_bp_abandon(bp, d - 1);
			return npx_bp_fail(bp, NPROXY_PEER_DEAD,
				       "rank %u (pid %d) died: it exited or was killed without hanging up (the bus's death notice)",
				       d - 1, (int)bp->pids[d - 1]);
		}
	}
	return NPROXY_SUCCESS;
}
