// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: setting up and tearing down this process's ranks.
 *
 * Per local rank, in parallel (each step is collective):
 *   bananaphone bus (the local-leader rendezvous, nproxy_bp_barrier, and the pid
 *   exchange of run_peer.c) -> libfabric engine (nproxy_net_open; names
 *   over the bus, or over TCP at NPROXY_ROOT_COMM_ID when ranks span
 *   hosts) -> handshake region (nproxy_hs_open: kmod if loaded, else memfd
 *   + emulator) -> comm in the shared proxy registry (nproxy_comm_open,
 *   gid = local index / K).
 *
 * This is the wiring a third party would otherwise write by hand; it stays
 * in this one file, behind run_ranks_open() / run_ranks_close(), so that a
 * one-call library entry can replace the body of open_rank()/close_rank().
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "run_rank.h"

/* The bus: create (bus rank 0) or join, the first barrier, the pids. */
static int open_bus(struct run_rank *rc)
{
	struct nproxy_bp_opts bopts = NPROXY_BP_OPTS_INIT;
	enum nproxy_status st;

	run_phase("bananaphone rendezvous (rank %u)", rc->rank);
	run_kill_point(RUN_KILL_RENDEZVOUS, rc->rank);
	bopts.job_id = rc->place->job_id;
	bopts.rank = rc->bus_rank;
	bopts.n_ranks = rc->bus_size;
	bopts.timeout_ms = (uint32_t)run_remaining_ms(rc->deadline);
	st = nproxy_bp_open(&bopts, &rc->bp);
	if (st == NPROXY_SUCCESS) {
		st = nproxy_bp_barrier(rc->bp, run_remaining_ms(rc->deadline));
		if (st != NPROXY_SUCCESS)
			snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone rendezvous: %s (%s)",
				 rc->rank, nproxy_status_str(st), nproxy_bp_strerror(rc->bp));
	} else {
		snprintf(rc->err, sizeof(rc->err), "rank %u: bananaphone %s job '%s': %s",
			 rc->rank, rc->bus_rank ? "connect to" : "create", rc->place->job_id,
			 nproxy_status_str(st));
	}
	if (st == NPROXY_SUCCESS)
		st = run_peers_watch(rc);
	return st == NPROXY_SUCCESS ? RUN_EXIT_OK : run_status_exit_nonusage(st);
}

static int open_engine(struct run_rank *rc)
{
	struct nproxy_net_opts nopts = { .size = sizeof(nopts) };
	const struct run_opts *o = rc->o;
	enum nproxy_status st;

	nopts.rank = rc->rank;
	nopts.n_ranks = rc->world;
	nopts.comm_id = 0;
	/* The engine's no-progress deadline: NPROXY_NET_TIMEOUT_MS or its
	 * default, but never past --timeout. */
	nopts.timeout_ms = run_remaining_ms(rc->deadline);
	if (!getenv("NPROXY_NET_TIMEOUT_MS") && nopts.timeout_ms > NPROXY_NET_DEFAULT_TIMEOUT_MS)
		nopts.timeout_ms = NPROXY_NET_DEFAULT_TIMEOUT_MS;
	else if (getenv("NPROXY_NET_TIMEOUT_MS"))
		nopts.timeout_ms = 0;
	nopts.provider = o->provider;
	nopts.root = rc->place->root;
	nopts.bp = rc->net_over_bus ? rc->bp : NULL;
	run_phase("engine setup (nproxy_net_open, rank %u)", rc->rank);
	run_kill_point(RUN_KILL_ENGINE, rc->rank);
	st = nproxy_net_open(&nopts, &rc->net);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	snprintf(rc->err, sizeof(rc->err),
		 "rank %u: libfabric engine (provider %s): %s (see the log above)",
		 rc->rank, o->provider ? o->provider : "default", nproxy_status_str(st));
	return st == NPROXY_UNSUPPORTED || st == NPROXY_INVALID ? RUN_EXIT_FAILURE
								: run_status_exit(st);
}

static int open_region(struct run_rank *rc)
{
	struct nproxy_hs_opts hopts = { .size = sizeof(hopts) };
	const struct run_opts *o = rc->o;
	enum nproxy_status st;

	hopts.backend = (enum nproxy_hs_backend)o->handshake;
	hopts.n_streams = 1;
	hopts.n_sems = rc->world + 1 > NPROXY_MAX_SEMS ? NPROXY_MAX_SEMS : rc->world + 1;
	hopts.rank = rc->rank;
	hopts.gid = o->ranks_per_proxy ? rc->local_idx / o->ranks_per_proxy : rc->local_idx;
	run_phase("handshake region (rank %u)", rc->rank);
	run_kill_point(RUN_KILL_REGION, rc->rank);
	st = nproxy_hs_open(&hopts, &rc->hs);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	snprintf(rc->err, sizeof(rc->err), "rank %u: handshake region (%s): %s", rc->rank,
		 nproxy_hs_backend_name(hopts.backend), nproxy_status_str(st));
	return RUN_EXIT_FAILURE;
}

/*
 * --one-thread-per-core: the reference runtime's busy spin.  Otherwise the
 * library's default, except that when this host's ranks outnumber its cpus
 * the spin window yields (the peer a worker waits for is then often
 * runnable on its cpu).  NPROXY_IDLE_POLICY, when set, decides.
 */
static enum nproxy_idle_policy idle_policy(const struct run_rank *rc)
{
	uint32_t host_ranks = (rc->place->local_procs ?: 1) * rc->o->ranks_per_proc;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (rc->o->one_thread_per_core)
		return NPROXY_IDLE_SPIN;
	if (getenv("NPROXY_IDLE_POLICY") || cpus <= 0 || host_ranks <= (uint32_t)cpus)
		return NPROXY_IDLE_DEFAULT;
	return NPROXY_IDLE_ADAPTIVE_YIELD;
}

static int open_comm(struct run_rank *rc)
{
	struct nproxy_comm_opts copts = { .size = sizeof(copts) };
	const struct run_opts *o = rc->o;
	enum nproxy_status st;

	copts.rank = rc->rank;
	copts.n_ranks = rc->world;
	copts.device_index = rc->local_idx;
	copts.ranks_per_proxy = o->ranks_per_proxy;
	copts.flags = NPROXY_COMM_F_DEVICE_WAIT;
	copts.idle_policy = idle_policy(rc);
	copts.hs = rc->hs;
	nproxy_net_seam(rc->net, &copts.seam);
	nproxy_net_host_barrier(rc->net, &copts.barrier);
	copts.timeout_ms = (uint32_t)(o->timeout_s + 1) * 1000u;
	run_phase("proxy comm setup (rank %u)", rc->rank);
	run_kill_point(RUN_KILL_COMM, rc->rank);
	st = nproxy_comm_open(&copts, &rc->comm);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	snprintf(rc->err, sizeof(rc->err), "rank %u: proxy comm: %s", rc->rank,
		 nproxy_status_str(st));
	return RUN_EXIT_FAILURE;
}

/* One rank, in its own thread: what it opened stays for close_rank(). */
static void *open_rank(void *arg)
{
	struct run_rank *rc = arg;

	rc->rc = rc->bus_size > 1 ? open_bus(rc) : RUN_EXIT_OK;
	if (rc->rc == RUN_EXIT_OK)
		rc->rc = open_engine(rc);
	if (rc->rc == RUN_EXIT_OK)
		rc->rc = open_region(rc);
	if (rc->rc == RUN_EXIT_OK)
		rc->rc = open_comm(rc);
	return NULL;
}

static void *close_rank(void *arg)
{
	struct run_rank *rc = arg;
	bool fatal = run_failed_fatally();

	rc->rc = RUN_EXIT_OK;
	/* Nobody closes its endpoint while a peer may still need it. */
	if (rc->bp && !fatal)
		nproxy_bp_barrier(rc->bp, run_remaining_ms(rc->deadline) ?: 1000);
	/* Aborts unfinished tasks (stopping their blocks) before the MRs go. */
	nproxy_comm_close(rc->comm);
	rc->comm = NULL;
	if (rc->net) {
		if (rc->data_reg)
			nproxy_net_mr_deregister(rc->net, rc->data_mr);
		if (rc->scratch_reg)
			nproxy_net_mr_deregister(rc->net, rc->scratch_mr);
	}
	nproxy_net_close(rc->net);
	rc->net = NULL;
	nproxy_hs_close(rc->hs);
	rc->hs = NULL;
	if (rc->bp) {
		/* After a fatal failure peers see us die, not leave. */
		if (!fatal)
			nproxy_bp_hangup(rc->bp);
		nproxy_bp_close(rc->bp);
		rc->bp = NULL;
	}
	free(rc->data);
	free(rc->scratch);
	rc->data = rc->scratch = NULL;
	run_peers_forget(rc);
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
