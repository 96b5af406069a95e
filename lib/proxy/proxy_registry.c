// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The process-global shared-proxy registry (libnrt's
 * g_shared_proxy_queues): gid -> {queue, refcnt} under one lock, and the
 * comm lifecycle that shares or creates a group's queue and worker.
 *
 * The refcount lives on the registry node, not on the queue: a comm that
 * joins an existing group never touches the queue's internals, and the
 * worker's CPU placement is applied only on the path that creates it.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include <nproxy/handshake.h>
#include "proxy_internal.h"

#define DEFAULT_TIMEOUT_S	300u

struct registry_node {
	uint32_t gid;
	uint32_t refcnt;
	struct proxy_queue *queue;
	struct registry_node *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct registry_node *registry_head;
/* Comms open in this process, every group (under registry_lock; read atomically). */
static uint32_t comms_open;

uint32_t npx_proxy_comms_open(void)
{
	return __atomic_load_n(&comms_open, __ATOMIC_RELAXED);
}

/* A positive integer from the environment: 0 when unset, -1 when malformed. */
static long env_positive(const char *name)
{
	uint32_t n = 0;

	switch (npx_env_u32_strict(name, 1, INT_MAX, &n)) {
	case NPX_ENV_SET:
		return n;
	case NPX_ENV_BAD:
		return -1;
	default:
		return 0;
	}
}

/* "0-1,3" -> set.  Every CPU must be < CPU_SETSIZE; empty lists are invalid. */
static enum nproxy_status parse_cpu_list(const char *list, cpu_set_t *set)
{
	const char *p = list;

	CPU_ZERO(set);
	while (*p) {
		char *end;
		unsigned long lo, hi;

		if (*p < '0' || *p > '9')
			return NPROXY_INVALID;
		lo = strtoul(p, &end, 10);
		hi = lo;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				return NPROXY_INVALID;
			hi = strtoul(p, &end, 10);
			p = end;
		}
		if (hi < lo || hi >= CPU_SETSIZE)
			return NPROXY_INVALID;
		for (; lo <= hi; lo++)
			CPU_SET(lo, set);
		if (*p == ',')
			p++;
		else if (*p)
			return NPROXY_INVALID;
	}
	return CPU_COUNT(set) ? NPROXY_SUCCESS : NPROXY_INVALID;
}

/* MISS path only: a new queue, placed and started. */
static enum nproxy_status create_group_queue(uint32_t gid, enum nproxy_idle_policy policy,
					     uint64_t spin_ns, struct proxy_queue **out)
{
	const char *cpus_env;
	cpu_set_t cpus;
	struct proxy_queue *q;
	enum nproxy_status rc;

	npx_env_str("NPROXY_PROXY_CPUSET", NULL, &cpus_env);
	if (cpus_env && parse_cpu_list(cpus_env, &cpus) != NPROXY_SUCCESS) {
		nproxy_log(NPROXY_LOG_ERROR, "[gid %u] NPROXY_PROXY_CPUSET=%s: not a CPU list",
			   gid, cpus_env);
		return NPROXY_INVALID;
	}
	q = npx_proxy_queue_create(gid, policy, spin_ns);
	if (!q)
		return NPROXY_RESOURCE;
	rc = npx_proxy_queue_start(q, cpus_env ? &cpus : NULL);
	if (rc != NPROXY_SUCCESS) {
		npx_proxy_queue_destroy(q);	/* never started: no join, nothing left */
		return rc;
	}
	*out = q;
	return NPROXY_SUCCESS;
}

static enum nproxy_status check_opts(const struct nproxy_comm_opts *in,
				     struct nproxy_comm_opts *opts)
{
	if (NPX_OPTS_CHECK(in, "nproxy_comm_open"))
		return NPROXY_INVALID;
	memcpy(opts, in, sizeof(*opts));
	if (opts->reserved || (opts->flags & ~NPROXY_COMM_F_ALL) || !opts->n_ranks ||
	    opts->rank >= opts->n_ranks || (unsigned int)opts->idle_policy > NPROXY_IDLE_ADAPTIVE_YIELD)
		return NPROXY_INVALID;
	if (!(opts->flags & NPROXY_COMM_F_SKIP_NET) &&
	    (!opts->seam.ops || !opts->seam.ops->start || !opts->seam.ops->progress ||
	     !opts->seam.ops->stop))
		return NPROXY_INVALID;
	if (opts->barrier.ops ? !opts->barrier.ops->arrive || !opts->barrier.ops->test
			      : opts->n_ranks != 1)
		return NPROXY_INVALID;
	return NPROXY_SUCCESS;
}

/*
 * The comm's group: the existing one with its gid (SHARE: its queue and
 * worker are reused) or a new one whose worker starts now.
 */
static enum nproxy_status join_group(struct nproxy_comm *comm, enum nproxy_idle_policy policy)
{
	struct registry_node *node;
	enum nproxy_status rc;

	pthread_mutex_lock(&registry_lock);
	for (node = registry_head; node; node = node->next)
		if (node->gid == comm->gid)
			break;
	if (node) {
		node->refcnt++;		/* SHARE: the queue and its worker are reused */
	} else {
		node = calloc(1, sizeof(*node));
		if (!node) {
			pthread_mutex_unlock(&registry_lock);
			return npx_comm_err(NULL, NPROXY_RESOURCE, "nproxy_comm_open: out of memory");
		}
		rc = create_group_queue(comm->gid, policy, npx_proxy_spin_ns_from_env(),
					&node->queue);
		if (rc != NPROXY_SUCCESS) {
			pthread_mutex_unlock(&registry_lock);
			free(node);
			return npx_comm_note(NULL, rc, "nproxy_comm_open: proxy group %u: no worker: %s",
					     comm->gid, nproxy_status_str(rc));
		}
		node->gid = comm->gid;
		node->refcnt = 1;
		node->next = registry_head;
		registry_head = node;
	}
	comm->queue = node->queue;
	__atomic_store_n(&comms_open, comms_open + 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&registry_lock);
	return NPROXY_SUCCESS;
}

enum nproxy_status nproxy_comm_open(const struct nproxy_comm_opts *in, struct nproxy_comm **out)
{
	struct nproxy_comm_opts opts;
	struct nproxy_comm *comm;
	enum nproxy_status rc;
	long timeout;

	npx_err_clear_open(NPX_ERR_COMM);
	if (!out)
		return npx_comm_err(NULL, NPROXY_INVALID, "nproxy_comm_open: out is NULL");
	*out = NULL;
	rc = check_opts(in, &opts);
	if (rc != NPROXY_SUCCESS)
		return npx_comm_err(NULL, rc, "nproxy_comm_open: invalid options");
	comm = calloc(1, sizeof(*comm));
	if (!comm)
		return npx_comm_err(NULL, NPROXY_RESOURCE, "nproxy_comm_open: out of memory");
	rc = npx_ranks_per_proxy(opts.ranks_per_proxy, &comm->ranks_per_proxy);
	if (rc != NPROXY_SUCCESS) {
		/* The parser logged the variable and its value. */
		npx_comm_note(NULL, rc, "nproxy_comm_open: bad ranks per network proxy (see the log)");
		goto err_free;
	}
	/* The environment speaks seconds, as the reference runtime's does. */
	timeout = opts.timeout_ms ? 0 : env_positive("NPROXY_PROXY_TIMEOUT_S");
	if (timeout < 0) {
		rc = npx_comm_note(NULL, NPROXY_INVALID,
				   "nproxy_comm_open: bad NPROXY_PROXY_TIMEOUT_S (see the log)");
		goto err_free;
	}
	if (timeout > UINT32_MAX / 1000)
		timeout = UINT32_MAX / 1000;
	comm->timeout_ms = opts.timeout_ms ? opts.timeout_ms :
			   (uint32_t)(timeout ? timeout : DEFAULT_TIMEOUT_S) * 1000u;
	comm->rank = opts.rank;
	comm->n_ranks = opts.n_ranks;
	comm->device_index = opts.device_index;
	comm->gid = opts.device_index / comm->ranks_per_proxy;
	comm->flags = opts.flags;
	comm->hs = opts.hs;
	comm->seam = opts.seam;
	comm->barrier = opts.barrier;
	comm->next_ctx = 1ull << 63;	/* library-assigned ctx values have the top bit set */
	pthread_mutex_init(&comm->cache_lock, NULL);
	comm->spin_ns = npx_proxy_consumer_spin_ns_from_env();

	rc = join_group(comm, opts.idle_policy);
	if (rc != NPROXY_SUCCESS)
		goto err_free;
	/* A device that announces its triggers lets the idle worker park. */
	comm->trigger_notify = comm->hs &&
		nproxy_hs_set_trigger_notify(comm->hs, npx_proxy_queue_kick, comm->queue) ==
		NPROXY_SUCCESS;
	npx_proxy_state_attach(comm);
	*out = comm;
	return NPROXY_SUCCESS;

err_free:
	free(comm);
	return rc;
}

void nproxy_comm_close(struct nproxy_comm *comm)
{
	struct registry_node **pn, *node;

	if (!comm)
		return;
	npx_proxy_state_detach(comm);
	/* Once this returns the device no longer calls into the queue. */
	if (comm->trigger_notify)
		nproxy_hs_set_trigger_notify(comm->hs, NULL, NULL);
	/* Our reference keeps the queue alive while its tasks are dropped. */
	npx_proxy_queue_drop_comm(comm->queue, comm);

	pthread_mutex_lock(&registry_lock);
	for (pn = &registry_head; *pn; pn = &(*pn)->next)
		if ((*pn)->queue == comm->queue)
			break;
	node = *pn;
	if (node)
		__atomic_store_n(&comms_open, comms_open - 1, __ATOMIC_RELAXED);
	if (node && --node->refcnt == 0) {
		*pn = node->next;
		/* Joined under the lock, so once we return the group's thread is gone. */
		npx_proxy_queue_destroy(node->queue);
		free(node);
	}
	pthread_mutex_unlock(&registry_lock);
	/* Every task and status of the comm is gone or cached by now. */
	npx_proxy_cache_drain(comm, PROXY_CACHE_STATUS, free);
	npx_proxy_cache_drain(comm, PROXY_CACHE_NET_TASK, npx_proxy_net_task_release);
	npx_proxy_cache_drain(comm, PROXY_CACHE_BARRIER_TASK, free);
	pthread_mutex_destroy(&comm->cache_lock);
	free(comm);
}

void nproxy_comm_abort(struct nproxy_comm *comm)
{
	if (comm && comm->queue)
		npx_proxy_queue_drop_comm(comm->queue, comm);
}

void nproxy_comm_kick(struct nproxy_comm *comm)
{
	if (comm && comm->queue)
		npx_proxy_queue_kick(comm->queue);
}

uint32_t nproxy_comm_timeout_ms(const struct nproxy_comm *comm)
{
	return comm ? comm->timeout_ms : 0;
}

uint32_t nproxy_comm_gid(const struct nproxy_comm *comm)
{
	return comm ? comm->gid : 0;
}

int nproxy_comm_worker_tid(const struct nproxy_comm *comm)
{
	return comm ? __atomic_load_n(&comm->queue->tid, __ATOMIC_ACQUIRE) : 0;
}

uint32_t nproxy_proxy_group_count(void)
{
	struct registry_node *node;
	uint32_t n = 0;

	pthread_mutex_lock(&registry_lock);
	for (node = registry_head; node; node = node->next)
		n++;
	pthread_mutex_unlock(&registry_lock);
	return n;
}

void npx_proxy_registry_end_grace(const struct proxy_queue *q)
{
	struct registry_node *node;

	/* Compared, never followed, until found among the live groups. */
	pthread_mutex_lock(&registry_lock);
	for (node = registry_head; node; node = node->next)
		if (node->queue == q) {
			npx_proxy_queue_end_grace(node->queue);
			break;
		}
	pthread_mutex_unlock(&registry_lock);
}

uint32_t nproxy_proxy_group_refcnt(uint32_t gid)
{
	struct registry_node *node;
	uint32_t n = 0;

	pthread_mutex_lock(&registry_lock);
	for (node = registry_head; node; node = node->next)
		if (node->gid == gid)
			n = node->refcnt;
	pthread_mutex_unlock(&registry_lock);
	return n;
}

enum nproxy_status nproxy_proxy_group_stats(uint32_t gid, struct nproxy_proxy_stats *out)
{
	struct registry_node *node;
	enum nproxy_status rc = NPROXY_NOT_FOUND;

	if (!out)
		return NPROXY_INVALID;
	pthread_mutex_lock(&registry_lock);
	for (node = registry_head; node; node = node->next) {
		if (node->gid == gid) {
			memset(out, 0, sizeof(*out));
			npx_proxy_queue_stats(node->queue, out);
			out->refcnt = node->refcnt;
			rc = NPROXY_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
	return rc;
}
