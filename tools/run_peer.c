// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: watching the local peer processes.  Every rank learns the
 * pid of every other process on the bus and holds a pidfd for each, so a
 * peer's death ends a wait at once (poll on the pidfds) instead of at the
 * engine's no-progress deadline, and names the rank that died.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "run_rank.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

struct pid_rec {
	uint32_t rank;
	int32_t pid;
};

enum nproxy_status run_peers_watch(struct run_rank *rc)
{
	struct pid_rec me = { .rank = rc->rank, .pid = getpid() };
	size_t lens[RUN_MAX_RANKS], offs[RUN_MAX_RANKS];
	enum nproxy_status st;
	void *all = NULL;

	st = nproxy_bp_allgather(rc->bp, &me, sizeof(me), &all, lens, offs,
			  run_remaining_ms(rc->deadline) ?: 1);
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone pid exchange: %s (%s)",
			 rc->rank, nproxy_status_str(st), nproxy_bp_strerror(rc->bp));
		return st;
	}
	for (uint32_t b = 0; b < rc->bus_size && b < RUN_MAX_RANKS; b++) {
		struct pid_rec peer;

		if (lens[b] != sizeof(peer))
			continue;
		memcpy(&peer, (char *)all + offs[b], sizeof(peer));
		if (peer.pid == me.pid)
			continue;
		rc->peer_pidfd[rc->n_peers] = (int)syscall(SYS_pidfd_open, peer.pid, 0);
		if (rc->peer_pidfd[rc->n_peers] < 0)
			continue;	/* already gone: the first wait reports it */
		rc->peer_rank[rc->n_peers] = peer.rank;
		rc->peer_bus[rc->n_peers] = b;
		rc->peer_pid[rc->n_peers] = peer.pid;
		rc->n_peers++;
	}
	free(all);
	return NPROXY_SUCCESS;
}

int run_peer_dead(const struct run_rank *rc)
{
	struct pollfd pfd[RUN_MAX_RANKS];

	for (uint32_t i = 0; i < rc->n_peers; i++)
		pfd[i] = (struct pollfd){ .fd = rc->peer_pidfd[i], .events = POLLIN };
	if (!rc->n_peers || poll(pfd, rc->n_peers, 0) <= 0)
		return -1;
	for (uint32_t i = 0; i < rc->n_peers; i++) {
		uint32_t culprit;

		if (!pfd[i].revents)
			continue;
		/* A peer that gave up because another died names that one. */
		culprit = nproxy_bp_blame(rc->bp, rc->peer_bus[i]);
		for (uint32_t j = 0; j < rc->n_peers; j++)
			if (rc->peer_bus[j] == culprit)
				i = j;
		/* Peers that see us exit now name it, not us. */
		nproxy_bp_abandon(rc->bp, rc->peer_bus[i]);
		return (int)i;
	}
	return -1;
}

void run_peers_forget(struct run_rank *rc)
{
	for (uint32_t i = 0; i < rc->n_peers; i++)
		close(rc->peer_pidfd[i]);
	rc->n_peers = 0;
}
