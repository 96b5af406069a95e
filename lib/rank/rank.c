// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * One rank of a job in one call: bus, engine, handshake region, comm.
 *
 * This is the glue every runtime adopting the library would otherwise
 * write by hand (nproxy-run did).  It sits above every other subsystem
 * and uses them through their public headers only.  Each step records
 * what it was doing in the rank's error text before its status goes
 * back, so a failed open says which step failed and, where the bus knows,
 * which peer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <nproxy/bananaphone.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>
#include "common/common_internal.h"
#include "proxy/proxy_internal.h"
#include "rank_internal.h"


/* The engine's longest rendezvous deadline (it refuses more). */
#define RANK_MAX_STEP_MS	3600000u

/* What is left of the open's deadline, at least 1 ms (a step then times
 * out at once instead of being told to "just check"). */
static uint32_t left_ms(const struct nproxy_rank *r)
{
	uint64_t now = (uint64_t)npx_now_ms();

	if (now >= r->deadline_ms)
		return 1;
	return r->deadline_ms - now > RANK_MAX_STEP_MS ? RANK_MAX_STEP_MS
						      : (uint32_t)(r->deadline_ms - now);
}

static enum nproxy_status rank_fail(struct nproxy_rank *r, enum nproxy_status st,
				    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static enum nproxy_status rank_fail(struct nproxy_rank *r, enum nproxy_status st,
				    const char *fmt, ...)
{
	char who[24];
	va_list ap;

	snprintf(who, sizeof(who), "rank %u", r->rank);
	va_start(ap, fmt);
	npx_err_vset(&r->err, NPX_ERR_RANK, NPROXY_LOG_ERROR, NPROXY_SUCCESS, who, fmt, ap);
	va_end(ap);
	return st;
}

static enum nproxy_status check_opts(struct nproxy_rank *r, const struct nproxy_rank_opts *o)
{
	if (!o->n_ranks || o->n_ranks > NPROXY_NET_MAX_RANKS || o->rank >= o->n_ranks)
		return rank_fail(r, NPROXY_INVALID, "options: rank %u of %u ranks (1..%u ranks)",
				 o->rank, o->n_ranks, NPROXY_NET_MAX_RANKS);
	if (r->local_size > NPROXY_BP_MAX_RANKS || r->local_size > o->n_ranks ||
	    o->local_rank >= r->local_size)
		return rank_fail(r, NPROXY_INVALID,
				 "options: local rank %u of %u on this host (%u ranks in the job, at most %u on a host)",
				 o->local_rank, r->local_size, o->n_ranks, NPROXY_BP_MAX_RANKS);
	if (r->local_size > 1 && (!o->job_id || !*o->job_id))
		return rank_fail(r, NPROXY_INVALID,
				 "options: %u ranks on this host need a job id for their bus",
				 r->local_size);
	if (o->n_streams > NPROXY_MAX_STREAMS || o->n_sems > NPROXY_MAX_SEMS)
		return rank_fail(r, NPROXY_INVALID,
				 "options: %u streams, %u semaphores (at most %u, %u)",
				 o->n_streams, o->n_sems, NPROXY_MAX_STREAMS, NPROXY_MAX_SEMS);
	if (o->idle_policy > NPROXY_IDLE_ADAPTIVE_YIELD)
		return rank_fail(r, NPROXY_INVALID, "options: unknown idle policy %d",
				 (int)o->idle_policy);
	return NPROXY_SUCCESS;
}

/* Every ';'-separated part of want ("tcp;ofi_rxm") is in have's parts. */
static bool provider_parts_in(const char *want, const char *have)
{
	char buf[128], *part, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", want);
	for (part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
		size_t len = strlen(part);
		const char *p = have;
		bool found = false;

		while (!found && (p = strstr(p, part))) {
			found = (p == have || p[-1] == ';') && (p[len] == 0 || p[len] == ';');
			p += len;
		}
		if (!found)
			return false;
	}
	return true;
}

/*
 * A provider the caller names must be one libfabric has here: checked
 * before any step, so that a typo is NPROXY_INVALID on every rank at once
 * instead of a failed engine after the bus was built.
 */
static enum nproxy_status check_provider(struct nproxy_rank *r, const char *want)
{
	struct fi_info *all = NULL, *i;
	bool known = false;
	int rc;

	if (!want)
		return NPROXY_SUCCESS;
	if (!*want || strlen(want) >= 128)
		return rank_fail(r, NPROXY_INVALID, "options: provider '%s': not a provider name", want);
	rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &all);
	if (rc)
		return rank_fail(r, NPROXY_UNSUPPORTED, "libfabric lists no provider: %s",
				 fi_strerror(-rc));
	for (i = all; i && !known; i = i->next)
		known = i->fabric_attr && i->fabric_attr->prov_name &&
			provider_parts_in(want, i->fabric_attr->prov_name);
	fi_freeinfo(all);
	if (!known) {
		const char *only = npx_env_text("FI_PROVIDER");

		return rank_fail(r, NPROXY_INVALID,
				 "options: provider '%s': libfabric has no such provider on this host%s%s%s",
				 want, only ? " (FI_PROVIDER=" : "", only ?: "",
				 only ? " narrows the list)" : "");
	}
	return NPROXY_SUCCESS;
}

/* The bus's own text of its last error: it names the peer's local (bus)
 * rank and pid, which is what a user can act on before ranks are known. */
static const char *bus_text(const struct nproxy_rank *r)
{
	return nproxy_bp_strerror(r->bp);
}

struct rank_card {
	uint32_t rank, n_ranks;
	int32_t pid;
};

/* Step 1: the bus, a barrier, and every local rank's (rank, n_ranks). */
static enum nproxy_status open_bus(struct nproxy_rank *r, const struct nproxy_rank_opts *o)
{
	struct rank_card me = { .rank = r->rank, .n_ranks = r->n_ranks, .pid = getpid() };
	struct nproxy_bp_opts bo = NPROXY_BP_OPTS_INIT;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	enum nproxy_status st;
	void *all = NULL;

	bo.rank = o->local_rank;	/* 0 creates the bus, the others connect */
	bo.n_ranks = r->local_size;
	bo.timeout_ms = left_ms(r);
	bo.job_id = o->job_id;
	st = nproxy_bp_open(&bo, &r->bp);
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "bananaphone %s job '%s' (local rank %u of %u): %s: %s",
				 o->local_rank ? "connect to" : "create", o->job_id, o->local_rank,
				 r->local_size, nproxy_status_str(st), nproxy_bp_strerror(NULL));
	st = nproxy_bp_barrier(r->bp, left_ms(r));
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "bananaphone rendezvous of job '%s' (local rank %u of %u): %s: %s",
				 o->job_id, o->local_rank, r->local_size, nproxy_status_str(st),
				 bus_text(r));
	st = nproxy_bp_allgather(r->bp, &me, sizeof(me), &all, lens, offs, left_ms(r));
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "bananaphone exchange of ranks in job '%s': %s: %s",
				 o->job_id, nproxy_status_str(st), bus_text(r));
	for (uint32_t b = 0; b < r->local_size; b++) {
		struct rank_card peer;

		if (lens[b] != sizeof(peer)) {
			st = rank_fail(r, NPROXY_INVALID, "local rank %u sent a %zu-byte card",
				       b, lens[b]);
			break;
		}
		memcpy(&peer, (char *)all + offs[b], sizeof(peer));
		r->bus_to_rank[b] = peer.rank;
		if (peer.n_ranks != r->n_ranks) {
			st = rank_fail(r, NPROXY_INVALID,
				       "local rank %u (rank %u, pid %d) says the job has %u ranks, this one %u",
				       b, peer.rank, peer.pid, peer.n_ranks, r->n_ranks);
			break;
		}
		for (uint32_t c = 0; c < b; c++) {
			if (r->bus_to_rank[c] == peer.rank) {
				st = rank_fail(r, NPROXY_INVALID,
					       "local ranks %u and %u both claim rank %u",
					       c, b, peer.rank);
				break;
			}
		}
		if (st != NPROXY_SUCCESS)
			break;
	}
	free(all);
	return st;
}

/*
 * The bus can carry the engine's name exchange only if it is the whole job
 * with bus rank == job rank on every rank; every rank decides it from the
 * same exchanged table, so they all pick the same rendezvous.
 */
static bool bus_is_job(const struct nproxy_rank *r)
{
	for (uint32_t b = 0; b < r->local_size; b++)
		if (r->bus_to_rank[b] != b)
			return false;
	return true;
}

/* Step 2: the engine.  Over the bus when the bus is the whole job and
 * bus ranks are job ranks, else over the TCP rendezvous. */
static enum nproxy_status open_net(struct nproxy_rank *r, const struct nproxy_rank_opts *o)
{
	struct nproxy_net_opts no = NPROXY_NET_OPTS_INIT;
	enum nproxy_status st;

	no.rank = r->rank;
	no.n_ranks = r->n_ranks;
	no.provider = o->provider;
	no.root = o->root;
	no.timeout_ms = o->net_timeout_ms;
	no.rdzv_timeout_ms = left_ms(r);
	if (r->bp && r->local_size == r->n_ranks && bus_is_job(r))
		no.bp = r->bp;
	st = nproxy_net_open(&no, &r->net);
	if (st == NPROXY_SUCCESS)
		return st;
	/* Over the bus, a peer that died or left is the bus's to name. */
	if (no.bp && (st == NPROXY_PEER_DEAD || st == NPROXY_PEER_LEFT))
		return rank_fail(r, st, "libfabric engine (provider %s): %s: %s",
				 o->provider ? o->provider : "default", nproxy_status_str(st),
				 bus_text(r));
	return rank_fail(r, st, "libfabric engine (provider %s): %s (see the log)",
			 o->provider ? o->provider : "default", nproxy_status_str(st));
}

/* Step 3: the handshake region. */
static enum nproxy_status open_hs(struct nproxy_rank *r, const struct nproxy_rank_opts *o)
{
	struct nproxy_hs_opts ho = NPROXY_HS_OPTS_INIT;
	enum nproxy_status st;

	ho.backend = o->backend;
	ho.n_streams = o->n_streams ?: 1;
	ho.n_sems = o->n_sems ?: (r->n_ranks + 1 > NPROXY_MAX_SEMS ? NPROXY_MAX_SEMS : r->n_ranks + 1);
	ho.rank = r->rank;
	ho.gid = r->gid;
	st = nproxy_hs_open(&ho, &r->hs);
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "handshake region (%s backend, %u streams, %u semaphores): %s",
				 nproxy_hs_backend_name(ho.backend), ho.n_streams, ho.n_sems,
				 nproxy_status_str(st));
	return st;
}

/*
 * The comm's idle policy.  The caller's, else the comm's own default --
 * unless this host's ranks outnumber its cpus: then the spin window yields
 * (the peer a worker waits for is often runnable on its cpu).  The
 * environment variables the comm reads still win over this choice.
 */
static enum nproxy_idle_policy choose_idle_policy(const struct nproxy_rank *r,
						  const struct nproxy_rank_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (o->idle_policy != NPROXY_IDLE_DEFAULT)
		return o->idle_policy;
	if (npx_env_text("NPROXY_IDLE_POLICY") || npx_env_text("NPROXY_ONE_THREAD_PER_CORE"))
		return NPROXY_IDLE_DEFAULT;
	if (cpus > 0 && r->local_size > (uint32_t)cpus)
		return NPROXY_IDLE_ADAPTIVE_YIELD;
	return NPROXY_IDLE_DEFAULT;
}

/*
 * A thread that drives its op inside libfabric for a second is stuck there
 * (the worker notices: npx_proxy_set_stall_hook()).  With shm that is a
 * lock a dead local peer held, and the stuck thread is the one that would
 * have asked the bus: release what stayed held (only a lock held all
 * through the window is touched, so a slow step loses nothing).
 */
static void drive_stalled(void)
{
	nproxy_net_shm_break_dead_locks(0);
}

/* Step 4: the comm over the engine, its host barrier and the region. */
static enum nproxy_status open_comm(struct nproxy_rank *r, const struct nproxy_rank_opts *o)
{
	struct nproxy_comm_opts co = NPROXY_COMM_OPTS_INIT;
	enum nproxy_status st;

	co.rank = r->rank;
	co.n_ranks = r->n_ranks;
	co.device_index = o->device_index;
	co.ranks_per_proxy = o->ranks_per_proxy;
	co.flags = NPROXY_COMM_F_DEVICE_WAIT;
	co.idle_policy = r->idle_policy;
	co.hs = r->hs;
	nproxy_net_seam(r->net, &co.seam);
	nproxy_net_host_barrier(r->net, &co.barrier);
	npx_rank_barrier_init(&r->barrier, &co.barrier, &co.barrier);
	co.timeout_ms = o->wait_timeout_ms;
	npx_proxy_set_stall_hook(drive_stalled);
	st = nproxy_comm_open(&co, &r->comm);
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "proxy comm (device %u, idle policy %d): %s",
				 o->device_index, (int)co.idle_policy, nproxy_status_str(st));
	return st;
}

/* Tear down whatever is open, newest first.  orderly: peers see a hangup. */
static void rank_release(struct nproxy_rank *r, bool orderly)
{
	nproxy_comm_close(r->comm);
	r->comm = NULL;
	npx_rank_barrier_destroy(&r->barrier);
	nproxy_net_close(r->net);
	r->net = NULL;
	nproxy_hs_close(r->hs);
	r->hs = NULL;
	if (r->bp) {
		if (orderly)
			nproxy_bp_hangup(r->bp);
		nproxy_bp_close(r->bp);
		r->bp = NULL;
	}
}

/* The caller's hook before a step, if any: its status ends the open. */
static enum nproxy_status before_step(struct nproxy_rank *r, const struct nproxy_rank_opts *o,
				      enum nproxy_rank_step step)
{
	enum nproxy_status st;

	if (!o->step_hook)
		return NPROXY_SUCCESS;
	st = o->step_hook(r, step, o->step_arg);
	if (st != NPROXY_SUCCESS)
		return rank_fail(r, st, "the caller's hook before step %d: %s", (int)step,
				 nproxy_status_str(st));
	return st;
}

enum nproxy_status nproxy_rank_open(const struct nproxy_rank_opts *opts,
				    struct nproxy_rank **out)
{
	struct nproxy_rank *r;
	enum nproxy_status st;
	uint32_t per_proxy;

	npx_err_clear_open(NPX_ERR_RANK);
	if (out)
		*out = NULL;	/* on every failure, the NULL opts included */
	if (!out || !opts)
		return npx_err_set(NULL, NPX_ERR_RANK, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "rank: open: %s is NULL", out ? "opts" : "out");
	/* Before any field is read: a short struct is not read past its size. */
	if (NPX_OPTS_CHECK(opts, "nproxy_rank_open") != NPROXY_SUCCESS)
		return npx_err_set(NULL, NPX_ERR_RANK, NPX_LOG_NONE, NPROXY_INVALID, NULL,
				   "rank: open: options of size %u, expected at least %zu and nothing set past it",
				   opts->size, sizeof(*opts));
	r = calloc(1, sizeof(*r));
	if (!r)
		return npx_err_set(NULL, NPX_ERR_RANK, NPROXY_LOG_ERROR, NPROXY_RESOURCE, NULL,
				   "rank %u: open: out of memory", opts->rank);
	r->rank = opts->rank;
	r->n_ranks = opts->n_ranks;
	r->local_size = opts->local_size ?: 1;
	r->open_timeout_ms = opts->open_timeout_ms ?: NPROXY_RANK_DEFAULT_OPEN_TIMEOUT_MS;
	r->deadline_ms = (uint64_t)npx_now_ms() + r->open_timeout_ms;
	st = check_opts(r, opts);
	if (st == NPROXY_SUCCESS)
		st = check_provider(r, opts->provider);
	if (st != NPROXY_SUCCESS)
		goto fail;
	r->idle_policy = choose_idle_policy(r, opts);
	/* The comm reads the same setting: its group and the region's gid agree. */
	st = npx_ranks_per_proxy(opts->ranks_per_proxy, &per_proxy);
	if (st != NPROXY_SUCCESS) {
		rank_fail(r, st, "options: bad ranks per network proxy in the environment (see the log)");
		goto fail;
	}
	r->gid = opts->device_index / per_proxy;
	if (r->local_size > 1) {
		st = before_step(r, opts, NPROXY_RANK_STEP_BUS);
		if (st == NPROXY_SUCCESS)
			st = open_bus(r, opts);
		if (st != NPROXY_SUCCESS)
			goto fail;
	}
	st = before_step(r, opts, NPROXY_RANK_STEP_ENGINE);
	if (st == NPROXY_SUCCESS)
		st = open_net(r, opts);
	if (st == NPROXY_SUCCESS)
		st = before_step(r, opts, NPROXY_RANK_STEP_REGION);
	if (st == NPROXY_SUCCESS)
		st = open_hs(r, opts);
	if (st == NPROXY_SUCCESS)
		st = before_step(r, opts, NPROXY_RANK_STEP_COMM);
	if (st == NPROXY_SUCCESS)
		st = open_comm(r, opts);
	if (st != NPROXY_SUCCESS)
		goto fail;
	*out = r;
	return NPROXY_SUCCESS;
fail:
	/*
	 * Peers still in a step hear that this rank left -- unless a peer
	 * died: then they are to see this rank go without a hangup, so the
	 * bus names the dead one (it recorded it) rather than this rank.
	 */
	rank_release(r, st != NPROXY_PEER_DEAD);
	npx_err_keep_open(NPX_ERR_RANK, &r->err);
	free(r);
	return st;
}

void nproxy_rank_close(struct nproxy_rank *r)
{
	if (!r)
		return;
	/*
	 * Nobody closes its endpoint while a local peer may still use it: meet
	 * the others first.  A dead peer ends the wait at once; a peer that
	 * never closes, at the open timeout.
	 */
	if (r->bp) {
		enum nproxy_status st = nproxy_bp_barrier(r->bp, r->open_timeout_ms);

		if (st != NPROXY_SUCCESS)
			nproxy_log(NPROXY_LOG_WARN, "rank %u: close: the other local ranks did not close: %s: %s",
				   r->rank, nproxy_status_str(st), nproxy_bp_strerror(r->bp));
	}
	rank_release(r, true);
	free(r);
}

/* A local death the bus saw goes to every other host's ranks. */
static enum nproxy_status report_bus_death(struct nproxy_rank *r)
{
	uint32_t bus_rank;
	int pid;
	char why[200];

	if (!r->bp || !r->net || !nproxy_bp_dead_peer(r->bp, &bus_rank, &pid) ||
	    bus_rank >= r->local_size)
		return NPROXY_SUCCESS;
	snprintf(why, sizeof(why), "died (local rank %u; its host's bus saw it exit without hanging up)",
		 bus_rank);
	nproxy_net_abort(r->net, r->bus_to_rank[bus_rank], pid, why);
	return NPROXY_PEER_DEAD;
}

/*
 * settle_engine()'s polls, 1 ms apart: how long an abort already on its
 * way gets to name the cause.  10 ms was once too short (8 ranks on 4
 * namespace hosts, 2 cpus, nice: a local rank that left on another host's
 * abort was named the dead rank).  A death with no abort behind it is
 * reported this much later.
 */
#define RANK_SETTLE_POLLS	100

/* Once per rank, after its bus saw a death (nproxy_net_shm_break_dead_locks). */
static void free_dead_locks(struct nproxy_rank *r)
{
	if (r->dead_locks_freed || !r->net)
		return;
	r->dead_locks_freed = true;
	nproxy_net_shm_break_dead_locks(0);
}

/*
 * The bus saw a death and no abort named a cause yet.  A local peer that
 * died inside the shm provider may hold a lock this process's worker spins
 * on while it holds the engine's, and nproxy_net_poll() passes while
 * another thread is inside the engine: release those locks, then poll a
 * few times, 1 ms apart, so an abort already on its way names the cause.
 */
static enum nproxy_status settle_engine(struct nproxy_rank *r)
{
	const struct timespec ms = { 0, 1000000 };
	enum nproxy_status nst = NPROXY_SUCCESS;

	free_dead_locks(r);
	for (int i = 0; i < RANK_SETTLE_POLLS && nst == NPROXY_SUCCESS; i++) {
		nst = nproxy_net_poll(r->net);
		if (*nproxy_net_abort_reason(r->net))
			break;
		nanosleep(&ms, NULL);
	}
	return nst;
}

enum nproxy_status nproxy_rank_check(struct nproxy_rank *r)
{
	enum nproxy_status st = NPROXY_SUCCESS;

	enum nproxy_status nst = NPROXY_SUCCESS;

	if (!r)
		return NPROXY_INVALID;
	/*
	 * The engine first: a local rank that just left because another
	 * host's abort reached it looks dead to its bus, and the abort
	 * (usually in this rank's queue by then too) names the cause.
	 */
	if (r->net)
		nst = nproxy_net_poll(r->net);
	if (r->bp)
		st = nproxy_bp_check(r->bp);
	if (st == NPROXY_PEER_DEAD && r->net && !*nproxy_net_abort_reason(r->net))
		nst = settle_engine(r);
	if (st == NPROXY_PEER_DEAD && !(r->net && *nproxy_net_abort_reason(r->net)))
		report_bus_death(r);
	if (st == NPROXY_SUCCESS)
		st = nst;
	if (st == NPROXY_SUCCESS)
		return st;
	/* The part's own text, as it is: it was logged when it was set. */
	if (r->net && *nproxy_net_abort_reason(r->net))
		npx_err_set(&r->err, NPX_ERR_RANK, NPX_LOG_NONE, st, NULL, "%s",
			    nproxy_net_abort_reason(r->net));
	else if (r->bp && *nproxy_bp_strerror(r->bp))
		npx_err_set(&r->err, NPX_ERR_RANK, NPX_LOG_NONE, st, NULL, "%s",
			    nproxy_bp_strerror(r->bp));
	else if (r->net)
		npx_err_set(&r->err, NPX_ERR_RANK, NPX_LOG_NONE, st, NULL, "%s",
			    nproxy_net_strerror(r->net));
	return st;
}

void nproxy_rank_abandon(struct nproxy_rank *r)
{
	if (!r)
		return;
	if (r->bp && nproxy_bp_check(r->bp) == NPROXY_PEER_DEAD)
		free_dead_locks(r);
	report_bus_death(r);
	rank_release(r, false);
	free(r);
}

const char *nproxy_rank_strerror(const struct nproxy_rank *r)
{
	return npx_err_text(r ? &r->err : NULL, NPX_ERR_RANK);
}

struct nproxy_comm *nproxy_rank_comm(struct nproxy_rank *r)
{
	return r ? r->comm : NULL;
}

struct nproxy_hs *nproxy_rank_hs(struct nproxy_rank *r)
{
	return r ? r->hs : NULL;
}

struct nproxy_net *nproxy_rank_net(struct nproxy_rank *r)
{
	return r ? r->net : NULL;
}

struct nproxy_bp *nproxy_rank_bp(struct nproxy_rank *r)
{
	return r ? r->bp : NULL;
}

enum nproxy_idle_policy nproxy_rank_idle_policy(const struct nproxy_rank *r)
{
	return r ? r->idle_policy : NPROXY_IDLE_DEFAULT;
}

uint32_t nproxy_rank_rank(const struct nproxy_rank *r)
{
	return r ? r->rank : 0;
}

uint32_t nproxy_rank_size(const struct nproxy_rank *r)
{
	return r ? r->n_ranks : 0;
}

uint32_t nproxy_rank_of_bus_rank(const struct nproxy_rank *r, uint32_t bus_rank)
{
	if (!r || !r->bp || bus_rank >= r->local_size || bus_rank >= NPROXY_BP_MAX_RANKS)
		return UINT32_MAX;
	return r->bus_to_rank[bus_rank];
}
