// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Provider selection and endpoint bring-up for the network engine: hints as
 * EFA needs them, fabric + domain + RDM endpoint + AV + CQ, and the
 * all-gather of endpoint names that fills the AV.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "net_internal.h"

#define NET_FI_VERSION	FI_VERSION(1, 17)
#define NET_ENV_MAX_MS	(3600 * 1000)	/* bound on the *_TIMEOUT_MS variables */

/* A timeout from the environment, 1 ms..1 h, or dflt. */
static int env_ms(const char *name, uint32_t dflt)
{
	uint32_t ms;

	npx_env_u32(name, dflt, 1, NET_ENV_MAX_MS, &ms);
	return (int)ms;
}

/*
 * What EFA needs, so the same code runs there: RDM, tagged + msg, the
 * provider may use FI_CONTEXT/FI_CONTEXT2 scratch in our requests, local MR
 * descriptors on virtual addresses of allocated memory with provider keys,
 * FI_MR_ENDPOINT accepted (handled in net_mr.c), one thread per domain and
 * manual data progress (the proxy worker is the only thing that moves).
 */
static struct fi_info *make_hints(const char *prov, bool manual_control)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->caps = FI_TAGGED | FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	/* Some providers (shm, rxm) only do auto control progress: then leave
	 * it unspecified rather than ask for AUTO. */
	hints->domain_attr->control_progress = manual_control ? FI_PROGRESS_MANUAL :
								FI_PROGRESS_UNSPEC;
	if (prov) {
		hints->fabric_attr->prov_name = strdup(prov);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return NULL;
		}
	}
	return hints;
}

static int getinfo_for(const char *prov, struct fi_info **out)
{
	int rc = -FI_ENODATA;

	for (int manual = 1; manual >= 0 && rc == -FI_ENODATA; manual--) {
		struct fi_info *hints = make_hints(prov, manual);

		if (!hints)
			return -FI_ENOMEM;
		rc = fi_getinfo(NET_FI_VERSION, NULL, NULL, 0, hints, out);
		fi_freeinfo(hints);
	}
	return rc;
}

/* An id per (host, network namespace): namespaces stand in for hosts in tests. */
static void host_id(char *buf, size_t len)
{
	char host[128] = "", ns[64] = "";
	ssize_t n;

	gethostname(host, sizeof(host) - 1);
	n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
	if (n > 0)
		ns[n] = 0;
	snprintf(buf, len, "%s/%s", host, ns);
}

static enum nproxy_status select_provider(struct nproxy_net *net, const char *want,
					  bool all_local)
{
	const char *order[3];
	int n_order = 0, rc = -FI_ENODATA;
	const char *env;

	npx_env_str("FI_PROVIDER", NULL, &env);
	npx_net_shm_pick_copy();

	if (want) {
		order[n_order++] = want;
	} else if (env && *env) {
		order[n_order++] = NULL;	/* libfabric applies FI_PROVIDER itself */
	} else {
		order[n_order++] = "efa";
		if (all_local)
			order[n_order++] = "shm";
		order[n_order++] = "tcp;ofi_rxm";
	}
	for (int i = 0; i < n_order; i++) {
		rc = getinfo_for(order[i], &net->info);
		if (rc == 0)
			break;
		nproxy_log(NPROXY_LOG_INFO, "net rank %u: provider %s: %s", net->rank,
			   order[i] ? order[i] : env, fi_strerror(-rc));
	}
	if (rc) {
		npx_net_set_err(net, "no RDM tagged provider (%s%s): %s",
			    want ? "asked for " : env && *env ? "FI_PROVIDER=" : "tried efa, shm, tcp;ofi_rxm",
			    want ? want : env && *env ? env : "", fi_strerror(-rc));
		return NPROXY_UNSUPPORTED;
	}
	snprintf(net->prov, sizeof(net->prov), "%s", net->info->fabric_attr->prov_name);
	return npx_net_mr_mode_init(net);
}

static enum nproxy_status fi_fail(struct nproxy_net *net, const char *what, int rc)
{
	npx_net_set_err(net, "%s on provider %s: %s", what, net->prov, fi_strerror(-rc));
	return NPROXY_NET_ERROR;
}

static enum nproxy_status bring_up(struct nproxy_net *net)
{
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,	/* we poll: manual progress */
	};
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int rc;

	rc = fi_fabric(net->info->fabric_attr, &net->fabric, NULL);
	if (rc)
		return fi_fail(net, "fi_fabric", rc);
	rc = fi_domain(net->fabric, net->info, &net->domain, NULL);
	if (rc)
		return fi_fail(net, "fi_domain", rc);
	if (net->info->domain_attr->av_type != FI_AV_UNSPEC)
		av_attr.type = net->info->domain_attr->av_type;
	av_attr.count = net->n_ranks;
	rc = fi_av_open(net->domain, &av_attr, &net->av, NULL);
	if (rc)
		return fi_fail(net, "fi_av_open", rc);
	rc = fi_cq_open(net->domain, &cq_attr, &net->cq, NULL);
	if (rc)
		return fi_fail(net, "fi_cq_open", rc);
	rc = fi_endpoint(net->domain, net->info, &net->ep, NULL);
	if (rc)
		return fi_fail(net, "fi_endpoint", rc);
	/* The endpoint's name is known now; its region is created by fi_enable. */
	npx_net_shm_sweep_at_open(net);
	npx_net_shm_clear_own(net);
	rc = fi_ep_bind(net->ep, &net->av->fid, 0);
	if (rc)
		return fi_fail(net, "fi_ep_bind(av)", rc);
	rc = fi_ep_bind(net->ep, &net->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc)
		return fi_fail(net, "fi_ep_bind(cq)", rc);
	rc = fi_enable(net->ep);
	if (rc)
		return fi_fail(net, "fi_enable", rc);
	return NPROXY_SUCCESS;
}

/*
 * Ranks given different providers cannot reach each other (their names do
 * not parse in the other's AV): the provider travels with the name, so
 * every rank says so at once instead of one failing in fi_av_insert while
 * the others wait for it.
 */
static bool providers_differ(struct nproxy_net *net, const char *all, const size_t *lens,
			     const size_t *offs)
{
	for (uint32_t r = 0; r < net->n_ranks; r++) {
		const char *prov = all + offs[r];
		size_t plen = strnlen(prov, lens[r]);

		if (plen == lens[r] || strcmp(prov, net->prov)) {
			npx_net_set_err(net, "providers differ: rank %u uses '%.*s', rank %u (this one) uses '%s': every rank must use the same provider",
					r, (int)plen, prov, net->rank, net->prov);
			return true;
		}
	}
	return false;
}

/* "provider\0endpoint-name" of every rank; the names go into the AV. */
static enum nproxy_status exchange_names(struct nproxy_net *net, struct net_xchg *x)
{
	size_t *lens = calloc(net->n_ranks, sizeof(size_t));
	size_t *offs = calloc(net->n_ranks, sizeof(size_t));
	size_t prov_len = strlen(net->prov) + 1;
	char blob[sizeof(net->prov) + 256];
	size_t name_len = sizeof(blob) - prov_len;
	enum nproxy_status st = NPROXY_RESOURCE;
	void *all = NULL;
	int rc;

	if (!lens || !offs)
		goto out;
	memcpy(blob, net->prov, prov_len);
	rc = fi_getname(&net->ep->fid, blob + prov_len, &name_len);
	if (rc) {
		st = fi_fail(net, "fi_getname", rc);
		goto out;
	}
	st = npx_net_xchg_allgather(x, blob, prov_len + name_len, &all, lens, offs);
	if (st != NPROXY_SUCCESS) {
		npx_net_set_err(net, "endpoint name exchange failed: %s: %s", nproxy_status_str(st),
			    npx_net_xchg_strerror(x));
		goto out;
	}
	if (providers_differ(net, all, lens, offs)) {
		st = NPROXY_INVALID;
		goto out;
	}
	for (uint32_t r = 0; r < net->n_ranks; r++) {
		size_t skip = strlen((char *)all + offs[r]) + 1;

		rc = fi_av_insert(net->av, (char *)all + offs[r] + skip, 1, &net->peers[r], 0, NULL);
		if (rc != 1) {
			npx_net_set_err(net, "fi_av_insert of rank %u (%zu-byte name) failed: %s", r,
				    lens[r] - skip, fi_strerror(rc < 0 ? -rc : FI_EINVAL));
			st = NPROXY_NET_ERROR;
			goto out;
		}
	}
	npx_net_shm_prefault(net);
	st = NPROXY_SUCCESS;
out:
	free(all);
	free(lens);
	free(offs);
	return st;
}

/* Every rank agrees on "all on one host" because each sees the same list. */
static enum nproxy_status exchange_hosts(struct nproxy_net *net, struct net_xchg *x,
					 bool *all_local)
{
	size_t *lens = calloc(net->n_ranks, sizeof(size_t));
	size_t *offs = calloc(net->n_ranks, sizeof(size_t));
	char id[256];
	void *all = NULL;
	enum nproxy_status st = NPROXY_RESOURCE;

	if (!lens || !offs)
		goto out;
	host_id(id, sizeof(id));
	st = npx_net_xchg_allgather(x, id, strlen(id), &all, lens, offs);
	if (st != NPROXY_SUCCESS) {
		npx_net_set_err(net, "host id exchange failed: %s: %s", nproxy_status_str(st),
			    npx_net_xchg_strerror(x));
		goto out;
	}
	*all_local = true;
	for (uint32_t r = 0; r < net->n_ranks; r++)
		if (lens[r] != strlen(id) || memcmp((char *)all + offs[r], id, lens[r]))
			*all_local = false;
out:
	free(all);
	free(lens);
	free(offs);
	return st;
}

/*
 * After this rank's connect barrier: an all-gather over the rendezvous (or
 * the bus), so the open returns on no rank before every rank has
 * connected.  The connect barrier alone does not give that: a rank that
 * finishes its rounds knows only that every rank arrived, and a peer still
 * finishing its rounds (seconds when many processes share few cpus) would
 * be covered by this rank's first op's no-progress deadline.
 */
static enum nproxy_status all_connected(struct nproxy_net *net, struct net_xchg *x)
{
	size_t *lens = calloc(net->n_ranks, sizeof(size_t));
	size_t *offs = calloc(net->n_ranks, sizeof(size_t));
	enum nproxy_status st = NPROXY_RESOURCE;
	uint8_t ok = 1;
	void *all = NULL;

	if (lens && offs)
		st = npx_net_xchg_allgather(x, &ok, sizeof(ok), &all, lens, offs);
	if (st != NPROXY_SUCCESS)
		npx_net_set_err(net, "waiting for every rank to connect: %s: %s",
				nproxy_status_str(st), npx_net_xchg_strerror(x));
	free(all);
	free(lens);
	free(offs);
	return st;
}

/* An open's arguments; a refusal is this thread's nproxy_net_strerror(NULL). */
static enum nproxy_status check_open_args(const struct nproxy_net_opts *opts,
					  struct nproxy_net **out)
{
	npx_err_clear_open(NPX_ERR_NET);
	if (!out)
		return npx_err_set(NULL, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "nproxy_net_open: out is NULL");
	*out = NULL;
	if (NPX_OPTS_CHECK(opts, "nproxy_net_open"))
		return npx_err_set(NULL, NPX_ERR_NET, NPX_LOG_NONE, NPROXY_INVALID, NULL,
				   "nproxy_net_open: options NULL or of a wrong size (see the log)");
	if (!opts->n_ranks || opts->n_ranks > NPROXY_NET_MAX_RANKS || opts->rank >= opts->n_ranks ||
	    opts->comm_id > NPROXY_NET_MAX_COMM_ID || opts->timeout_ms > NET_MAX_TIMEOUT_MS ||
	    opts->rdzv_timeout_ms > NET_MAX_TIMEOUT_MS)
		return npx_err_set(NULL, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL,
				   "nproxy_net_open: bad options (rank %u of %u, comm %u, timeouts %u/%u ms of at most %u)",
				   opts->rank, opts->n_ranks, opts->comm_id, opts->timeout_ms,
				   opts->rdzv_timeout_ms, NET_MAX_TIMEOUT_MS);
	return NPROXY_SUCCESS;
}

/* The per-peer arrays of an engine of net->n_ranks ranks; false when out of memory. */
static bool alloc_per_peer(struct nproxy_net *net)
{
	net->peers = calloc(net->n_ranks, sizeof(*net->peers));
	net->inflight = calloc(2 * (size_t)net->n_ranks, sizeof(*net->inflight));
	net->chan_stamp = calloc(2 * (size_t)net->n_ranks, sizeof(*net->chan_stamp));
	net->last_activity_ms = calloc(net->n_ranks, sizeof(*net->last_activity_ms));
	net->heard = calloc(net->n_ranks, sizeof(*net->heard));
	net->reached = calloc(net->n_ranks, sizeof(*net->reached));
	return net->peers && net->inflight && net->chan_stamp && net->last_activity_ms &&
	       net->heard && net->reached;
}

/* The open's one info line: where its time went (connected_ms 0: no connect phase). */
static void log_opened(const struct nproxy_net *net, int64_t start_ms, int64_t named_ms,
		       int64_t connected_ms)
{
	nproxy_log(NPROXY_LOG_INFO,
		   "net rank %u of %u: comm %u on %s, %u credits, %d ms timeout (open: %" PRId64 " ms to the names, %" PRId64 " ms connecting, %" PRId64 " ms waiting for the other ranks to connect)",
		   net->rank, net->n_ranks, net->comm_id, net->prov, net->credits, net->timeout_ms,
		   named_ms - start_ms, connected_ms ? connected_ms - named_ms : 0,
		   connected_ms ? npx_now_ms() - connected_ms : 0);
}

NPROXY_API enum nproxy_status nproxy_net_open(const struct nproxy_net_opts *opts,
					      struct nproxy_net **out)
{
	struct nproxy_net *net;
	int64_t start_ms = npx_now_ms(), named_ms, connected_ms = 0;
	struct net_xchg x = { 0 };
	enum nproxy_status st;
	bool all_local = true;

	st = check_open_args(opts, out);
	if (st != NPROXY_SUCCESS)
		return st;
	net = calloc(1, sizeof(*net));
	if (!net)
		return npx_err_set(NULL, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_RESOURCE, NULL,
				   "nproxy_net_open: rank %u: out of memory", opts->rank);
	pthread_mutex_init(&net->lock, NULL);
	net->rank = opts->rank;
	net->n_ranks = opts->n_ranks;
	net->comm_id = opts->comm_id;
	net->credits = opts->credits;
	if (!net->credits)
		npx_env_u32("NPROXY_NET_CREDITS", NPROXY_NET_DEFAULT_CREDITS, 1, 4096, &net->credits);
	net->timeout_ms = opts->timeout_ms ? (int)opts->timeout_ms :
		env_ms("NPROXY_NET_TIMEOUT_MS", NPROXY_NET_DEFAULT_TIMEOUT_MS);
	st = NPROXY_RESOURCE;
	if (!alloc_per_peer(net))
		goto fail;

	st = npx_net_xchg_open(&x, opts, opts->rdzv_timeout_ms ? (int)opts->rdzv_timeout_ms :
			   env_ms("NPROXY_NET_RDZV_TIMEOUT_MS", NPROXY_NET_DEFAULT_RDZV_TIMEOUT_MS));
	if (st != NPROXY_SUCCESS)
		goto fail;
	if (x.bp)
		all_local = true;
	else if (net->n_ranks > 1 && (st = exchange_hosts(net, &x, &all_local)) != NPROXY_SUCCESS)
		goto fail;
	st = select_provider(net, opts->provider, all_local);
	if (st != NPROXY_SUCCESS)
		goto fail_local;
	st = bring_up(net);
	if (st != NPROXY_SUCCESS)
		goto fail_local;
	st = exchange_names(net, &x);
	if (st != NPROXY_SUCCESS)
		goto fail;
	st = npx_net_barrier_init(net);
	if (st == NPROXY_SUCCESS)
		st = npx_net_abort_init(net);
	if (st != NPROXY_SUCCESS)
		goto fail_local;
	npx_net_in_process_add(net);
	named_ms = npx_now_ms();
	/* shm needs no connection; every other provider may make one lazily. */
	if (strcmp(net->prov, "shm")) {
		st = npx_net_barrier_connect(net, x.timeout_ms);
		if (st != NPROXY_SUCCESS)
			goto fail_local;
		connected_ms = npx_now_ms();
		st = all_connected(net, &x);
		if (st != NPROXY_SUCCESS)
			goto fail;
	}
	log_opened(net, start_ms, named_ms, connected_ms);
	net->open_limit_ms = x.timeout_ms;
	net->opened = true;
	npx_net_xchg_close(&x);
	*out = net;
	return NPROXY_SUCCESS;
fail_local:
	/* The others would wait for our next all-gather until the deadline. */
	npx_net_xchg_abort(&x, st, nproxy_net_strerror(net));
fail:
	npx_net_xchg_close(&x);
	npx_err_keep_open(NPX_ERR_NET, &net->err);
	nproxy_net_close(net);
	return st;
}

/*
 * RDM over unreliable datagrams (ofi_rxd): a sender's completion waits for
 * the receiver's ack, and the receiver sends (and resends) acks only while
 * it drives progress.  A rank whose last recv completed and that closes at
 * once can leave a peer's last send without its ack until that peer's
 * deadline.  So on such an endpoint close keeps reading the CQ a while
 * first; a reliable transport (tcp, shm, EFA's SRD) needs none of this.
 */
#define NET_DGRAM_LINGER_MS	500

static void linger_for_acks(struct nproxy_net *net)
{
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 200000 };
	uint32_t moved = 0;
	int64_t until;

	if (!net->ep || !net->cq || net->info->ep_attr->protocol != FI_PROTO_RXD)
		return;
	until = npx_now_ms() + NET_DGRAM_LINGER_MS;
	while (npx_now_ms() < until) {
		pthread_mutex_lock(&net->lock);
		npx_net_drain_cq(net, &moved);
		pthread_mutex_unlock(&net->lock);
		nanosleep(&nap, NULL);
	}
}

NPROXY_API void nproxy_net_close(struct nproxy_net *net)
{
	if (!net)
		return;
	npx_net_in_process_closing(net);
	linger_for_acks(net);
	npx_net_engine_close(net);	/* cancels posted ops, forgets blocks */
	if (net->ep) {
		npx_net_barrier_cancel(net);
		npx_net_abort_cancel(net);
	}
	if (net->ep)
		fi_close(&net->ep->fid);
	npx_net_mr_close_all(net);
	if (net->av)
		fi_close(&net->av->fid);
	if (net->cq)
		fi_close(&net->cq->fid);
	if (net->domain)
		fi_close(&net->domain->fid);
	if (net->fabric)
		fi_close(&net->fabric->fid);
	if (net->info)
		fi_freeinfo(net->info);
	/* Only now, with the endpoint gone, can no provider touch a request. */
	npx_net_engine_free(net);
	npx_net_barrier_free(net);
	npx_net_abort_free(net);
	npx_net_in_process_remove(net);
	free(net->mrs);
	free(net->peers);
	free(net->inflight);
	free(net->chan_stamp);
	free(net->last_activity_ms);
	free(net->heard);
	free(net->reached);
	pthread_mutex_destroy(&net->lock);
	free(net);
}

NPROXY_API void nproxy_net_seam(struct nproxy_net *net, struct nproxy_seam *out)
{
	out->ops = &npx_net_seam_ops;
	out->engine = net;
}

NPROXY_API void nproxy_net_host_barrier(struct nproxy_net *net, struct nproxy_host_barrier *out)
{
	out->ops = &npx_net_barrier_ops;
	out->ctx = net;
}

NPROXY_API uint32_t nproxy_net_rank(const struct nproxy_net *net)
{
	return net->rank;
}

NPROXY_API uint32_t nproxy_net_size(const struct nproxy_net *net)
{
	return net->n_ranks;
}

NPROXY_API const char *nproxy_net_provider(const struct nproxy_net *net)
{
	return net->prov;
}

