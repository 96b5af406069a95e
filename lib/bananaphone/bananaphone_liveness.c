// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone liveness: a pidfd for every peer, polled (never waited on)
 * from every wait loop at most every BP_WAIT_SLICE_MS.  A peer whose pidfd
 * is readable has exited; if it set its "left" flag first it hung up in an
 * orderly way, otherwise it died and the bus is broken (NPROXY_PEER_DEAD,
 * naming rank and pid).
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

/*
 * Poll every peer's pidfd once; a dead (not hung up) one breaks the bus.
 * Several may be gone: a rank that gave up because it saw another die
 * (nproxy_bp_abandon) is not the one to name while a rank that died on its own
 * is among them, and when it is the only one, the rank it saw die is named
 * through it.  Whatever is named is recorded as what made this rank give up.
 */
enum nproxy_status npx_bp_check_dead(struct nproxy_bp *bp)
{
	struct pollfd pfd[NPROXY_BP_MAX_RANKS];
	uint32_t idx[NPROXY_BP_MAX_RANKS];
	uint32_t r, k = 0;
	int n;

	for (r = 0; r < bp->n; r++) {
		if (bp->pidfds[r] < 0)
			continue;
		pfd[k].fd = bp->pidfds[r];
		pfd[k].events = POLLIN;
		pfd[k].revents = 0;
		idx[k++] = r;
	}
	if (!k)
		return NPROXY_SUCCESS;
	n = poll(pfd, k, 0);
	if (n <= 0)
		return NPROXY_SUCCESS;
	int gave_up = -1;
	uint32_t saw = 0;

	for (r = 0; r < k; r++) {
		uint32_t peer = idx[r], s = 0;

		if (!(pfd[r].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (bp->ctl && atomic_load(&npx_bp_rank_ctl(bp, peer)->left))
			continue;	/* exited after hanging up: not a death */
		if (bp->ctl)
			s = atomic_load(&npx_bp_rank_ctl(bp, peer)->saw_dead);
		if (s && s - 1 < bp->n && s - 1 != bp->rank) {
			if (gave_up < 0) {
				gave_up = (int)peer;
				saw = s - 1;
			}
			continue;
		}
		nproxy_bp_abandon(bp, peer);
		return npx_bp_fail(bp, NPROXY_PEER_DEAD,
			       "rank %u (pid %d) died: it exited or was killed without hanging up",
			       peer, (int)bp->pids[peer]);
	}
	if (gave_up < 0)
		return NPROXY_SUCCESS;
	nproxy_bp_abandon(bp, saw);
	return npx_bp_fail(bp, NPROXY_PEER_DEAD,
		       "rank %u (pid %d) died (rank %u, pid %d, saw it and exited)",
		       saw, (int)bp->pids[saw], (uint32_t)gave_up, (int)bp->pids[gave_up]);
}

enum nproxy_status nproxy_bp_check_peers(struct nproxy_bp *bp, uint32_t *dead, int *pid)
{
	enum nproxy_status st;
	uint32_t who;

	if (!bp)
		return NPROXY_INVALID;
	st = npx_bp_check_dead(bp);
	if (st != NPROXY_PEER_DEAD)
		return st;
	/* npx_bp_check_dead() recorded whom this rank gives up for. */
	who = bp->ctl ? atomic_load(&npx_bp_rank_ctl(bp, bp->rank)->saw_dead) : 0;
	who = who && who - 1 < bp->n ? who - 1 : bp->rank;
	if (dead)
		*dead = who;
	if (pid)
		*pid = (int)bp->pids[who];
	return st;
}
