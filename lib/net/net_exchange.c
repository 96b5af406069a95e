// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Endpoint-name exchange for nproxy_net_open(): all-gathers over the
 * caller's bananaphone bus when it spans the comm (one host), else over the
 * TCP rendezvous at the root address (lib/net/net_rdzv.c).
 */
#include <stdlib.h>
#include <string.h>
#include <nproxy/bananaphone.h>
#include <nproxy/log.h>
#include "net_internal.h"

enum nproxy_status npx_net_xchg_open(struct net_xchg *x, const struct nproxy_net_opts *opts,
				 int timeout_ms)
{
	const char *root = opts->root;
	struct nproxy_rdzv_opts ro = NPROXY_RDZV_OPTS_INIT;

	if (!root)
		npx_env_str("NPROXY_ROOT_COMM_ID", NULL, &root);

	memset(x, 0, sizeof(*x));
	x->rank = opts->rank;
	x->n_ranks = opts->n_ranks;
	x->timeout_ms = timeout_ms;
	if (opts->n_ranks == 1)
		return NPROXY_SUCCESS;
	if (opts->bp) {
		if (nproxy_bp_size(opts->bp) != opts->n_ranks || nproxy_bp_rank(opts->bp) != opts->rank) {
			nproxy_log(NPROXY_LOG_ERROR,
				   "net rank %u of %u: the bananaphone bus is rank %u of %u, not this comm",
				   opts->rank, opts->n_ranks, nproxy_bp_rank(opts->bp), nproxy_bp_size(opts->bp));
			return NPROXY_INVALID;
		}
		x->bp = opts->bp;
		return NPROXY_SUCCESS;
	}
	if (!root || !*root) {
		nproxy_log(NPROXY_LOG_ERROR,
			   "net rank %u of %u: no bananaphone bus and no root address (set NPROXY_ROOT_COMM_ID=host:port)",
			   opts->rank, opts->n_ranks);
		return NPROXY_INVALID;
	}
	ro.rank = opts->rank;
	ro.n_ranks = opts->n_ranks;
	ro.timeout_ms = (uint32_t)timeout_ms;
	ro.root = root;
	return nproxy_rdzv_open(&ro, &x->rz);
}

enum nproxy_status npx_net_xchg_allgather(struct net_xchg *x, const void *blob, size_t len,
				      void **all, size_t *lens, size_t *offs)
{
	enum nproxy_status st;

	if (x->n_ranks == 1) {
		*all = malloc(len ? len : 1);
		if (!*all)
			return NPROXY_RESOURCE;
		memcpy(*all, blob, len);
		lens[0] = len;
		offs[0] = 0;
		return NPROXY_SUCCESS;
	}
	if (x->bp) {
		st = nproxy_bp_allgather(x->bp, blob, len, all, lens, offs, x->timeout_ms);
		if (st != NPROXY_SUCCESS)
			nproxy_log(NPROXY_LOG_ERROR, "net rank %u: bananaphone all-gather: %s",
				   x->rank, nproxy_bp_strerror(x->bp));
		return st;
	}
	return nproxy_rdzv_allgather(x->rz, blob, len, all, lens, offs);
}

/* Bananaphone needs no message: its liveness check sees this process die. */
void npx_net_xchg_abort(struct net_xchg *x, enum nproxy_status st, const char *why)
{
	nproxy_rdzv_abort(x->rz, st, why);
}

void npx_net_xchg_close(struct net_xchg *x)
{
	nproxy_rdzv_close(x->rz);
	x->rz = NULL;
}

const char *npx_net_xchg_strerror(const struct net_xchg *x)
{
	if (x->rz)
		return nproxy_rdzv_strerror(x->rz);
	if (x->bp)
		return nproxy_bp_strerror(x->bp);
	return "";
}
