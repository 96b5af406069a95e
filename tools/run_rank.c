// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: setting up and tearing down this process's ranks.
 *
 * Per local rank, in parallel (each step is collective), one call:
 * nproxy_rank_open() builds the bananaphone bus, the libfabric engine
 * (names over the bus, or over TCP at NPROXY_ROOT_COMM_ID when ranks span
 * hosts), the handshake region (kmod if loaded, else memfd + emulator) and
 * the comm in the shared proxy registry (gid = local index / K).  Its step
 * hook adds what is nproxy-run's own: the phase shown by the supervisor,
 * the kill points of the selftests.  Then the op verb's coll on the rank.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "run_rank.h"

/* Each step of nproxy_rank_open(): how its phase reads, its kill point. */
static const struct {
	const char *phase;	/* up to the rank: "%srank %u)" */
	enum run_kill_phase kill;
} steps[] = {
	[NPROXY_RANK_STEP_BUS] = { "bananaphone rendezvous (", RUN_KILL_RENDEZVOUS },
	[NPROXY_RANK_STEP_ENGINE] = { "engine setup (nproxy_net_open, ", RUN_KILL_ENGINE },
	[NPROXY_RANK_STEP_REGION] = { "handshake region (", RUN_KILL_REGION },
	[NPROXY_RANK_STEP_COMM] = { "proxy comm setup (", RUN_KILL_COMM },
};

/*
 * Before each step of nproxy_rank_open(): say which one this rank is in
 * (the supervisor names it when the job hangs or a rank dies) and honour
 * the kill points.
 */
static enum nproxy_status on_step(struct nproxy_rank *nr, enum nproxy_rank_step step, void *arg)
{
	struct run_rank *rc = arg;

	if ((size_t)step < sizeof(steps) / sizeof(steps[0]) && steps[step].phase) {
		run_phase("%srank %u)", steps[step].phase, rc->rank);
		run_kill_point(steps[step].kill, rc->rank);
	}
	return NPROXY_SUCCESS;
}

/* One rank, in its own thread: the library's one-call open. */
static void *open_rank(void *arg)
{
	struct run_rank *rc = arg;
	const struct run_opts *o = rc->o;
	struct nproxy_rank_opts ro = NPROXY_RANK_OPTS_INIT;
	enum nproxy_status st;
	int left = run_remaining_ms(rc->deadline);

	ro.rank = rc->rank;
	ro.n_ranks = rc->world;
	if (rc->bus_size > 1) {
		ro.local_rank = rc->bus_rank;
		ro.local_size = rc->bus_size;
		ro.job_id = rc->place->job_id;
	}
	ro.provider = o->provider;
	ro.root = rc->place->root;
	ro.backend = (enum nproxy_hs_backend)o->handshake;
	ro.device_index = rc->local_idx;
	ro.ranks_per_proxy = o->ranks_per_proxy;
	/* --one-thread-per-core: the reference runtime's busy spin; else the
	 * library's choice (it yields when this host's ranks outnumber its
	 * cpus). */
	ro.idle_policy = o->one_thread_per_core ? NPROXY_IDLE_SPIN : NPROXY_IDLE_DEFAULT;
	ro.open_timeout_ms = left > 0 ? (uint32_t)left : 1;
	/* The engine's no-progress deadline: NPROXY_NET_TIMEOUT_MS or its
	 * default, but never past --timeout. */
	if (!getenv("NPROXY_NET_TIMEOUT_MS"))
		ro.net_timeout_ms = ro.open_timeout_ms < NPROXY_NET_DEFAULT_TIMEOUT_MS ?
				    ro.open_timeout_ms : NPROXY_NET_DEFAULT_TIMEOUT_MS;
	ro.wait_timeout_ms = (uint32_t)(o->timeout_s + 1) * 1000u;
	ro.step_hook = on_step;
	ro.step_arg = rc;
	st = nproxy_rank_open(&ro, &rc->nrank);
	if (st != NPROXY_SUCCESS) {
		rc->bp = NULL;	/* released with the failed open */
		snprintf(rc->err, sizeof(rc->err), "%s", nproxy_rank_strerror(NULL));
		rc->rc = run_status_exit_nonusage(st);
		return NULL;
	}
	rc->bp = nproxy_rank_bp(rc->nrank);
	rc->net = nproxy_rank_net(rc->nrank);
	rc->hs = nproxy_rank_hs(rc->nrank);
	rc->comm = nproxy_rank_comm(rc->nrank);
	st = nproxy_coll_open(rc->nrank, &rc->coll);
	if (st != NPROXY_SUCCESS) {
		snprintf(rc->err, sizeof(rc->err), "rank %u: op verb: %s", rc->rank,
			 nproxy_status_str(st));
		rc->rc = run_status_exit_nonusage(st);
		return NULL;
	}
	rc->rc = RUN_EXIT_OK;
	return NULL;
}

static void *close_rank(void *arg)
{
	struct run_rank *rc = arg;

	rc->rc = RUN_EXIT_OK;
	/*
	 * The library meets the other local ranks first, so that nobody
	 * closes its endpoint while a peer may still need it -- unless a
	 * failure left them unsure of our state: then they are to see us die,
	 * not leave.  Closing the engine releases the buffers' registrations.
	 */
	run_buffers_free(rc);
	nproxy_coll_close(rc->coll);
	rc->coll = NULL;
	if (run_failed_fatally())
		nproxy_rank_abandon(rc->nrank);
	else
		nproxy_rank_close(rc->nrank);
	rc->nrank = NULL;
	rc->bp = NULL;
	rc->net = NULL;
	rc->hs = NULL;
	rc->comm = NULL;
	return NULL;
}

/* Run fn on every local rank in its own thread (collective setup steps). */
static int for_each_rank_parallel(struct run_rank *ranks, uint32_t n, void *(*fn)(void *))
{
	pthread_t tids[RUN_MAX_RANKS];
	int worst = RUN_EXIT_OK;

	for (uint32_t i = 0; i < n; i++) {
		ranks[i].rc = RUN_EXIT_FAILURE;
		if (pthread_create(&tids[i], NULL, fn, &ranks[i])) {
			snprintf(ranks[i].err, sizeof(ranks[i].err),
				 "rank %u: cannot start a setup thread", ranks[i].rank);
			tids[i] = 0;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (tids[i])
			pthread_join(tids[i], NULL);
		if (ranks[i].rc != RUN_EXIT_OK && worst == RUN_EXIT_OK) {
			worst = ranks[i].rc;
			run_fail(worst, "%s", ranks[i].err);
		}
	}
	return worst;
}

int run_ranks_open(struct run_rank *ranks, uint32_t n)
{
	return for_each_rank_parallel(ranks, n, open_rank);
}

void run_ranks_close(struct run_rank *ranks, uint32_t n)
{
	for_each_rank_parallel(ranks, n, close_rank);
}
