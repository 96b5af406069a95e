// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Memory registration cache: one libfabric MR per registered buffer, shared
 * by every block that references it (ops carry (mr id, offset) pairs), so
 * the hot path never registers.  With FI_MR_ENDPOINT the MR is bound to the
 * endpoint and enabled; without FI_MR_LOCAL no MR is needed at all and the
 * entry only validates bounds.
 */
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include "net_internal.h"

enum nproxy_status npx_net_mr_register_locked(struct nproxy_net *net, void *buf, size_t len,
					  uint32_t *id)
{
	struct net_mr *m = NULL;
	uint32_t slot = net->n_mrs;
	int rc;

	if (!buf || !len) {
		npx_net_set_err(net, "mr_register: empty buffer (%p, %zu bytes)", buf, len);
		return NPROXY_INVALID;
	}
	for (uint32_t i = 0; i < net->n_mrs; i++) {
		if (net->mrs[i].refs && net->mrs[i].base == buf && net->mrs[i].len == len) {
			net->mrs[i].refs++;
			*id = i;
			return NPROXY_SUCCESS;
		}
		if (!net->mrs[i].refs && slot == net->n_mrs)
			slot = i;
	}
	if (slot == net->n_mrs) {
		struct net_mr *grown = realloc(net->mrs, (net->n_mrs + 1) * sizeof(*grown));

		if (!grown)
			return NPROXY_RESOURCE;
		net->mrs = grown;
		net->n_mrs++;
	}
	m = &net->mrs[slot];
	memset(m, 0, sizeof(*m));
	if (net->mr_local) {
		rc = fi_mr_reg(net->domain, buf, len, FI_SEND | FI_RECV, 0, 0, 0, &m->mr, NULL);
		if (!rc && net->mr_endpoint) {
			rc = fi_mr_bind(m->mr, &net->ep->fid, 0);
			if (!rc)
				rc = fi_mr_enable(m->mr);
		}
		if (rc) {
			if (m->mr)
				fi_close(&m->mr->fid);
			m->mr = NULL;
			npx_net_set_err(net, "fi_mr_reg of %zu bytes at %p on %s: %s", len, buf,
				    net->prov, fi_strerror(-rc));
			return NPROXY_NET_ERROR;
		}
		m->desc = fi_mr_desc(m->mr);
	}
	m->base = buf;
	m->len = len;
	m->refs = 1;
	*id = slot;
	return NPROXY_SUCCESS;
}

NPROXY_API enum nproxy_status nproxy_net_mr_register(struct nproxy_net *net, void *buf,
						     size_t len, uint32_t *id)
{
	enum nproxy_status st;

	if (!net || !id)
		return NPROXY_INVALID;
	pthread_mutex_lock(&net->lock);
	st = npx_net_mr_register_locked(net, buf, len, id);
	pthread_mutex_unlock(&net->lock);
	return st;
}

NPROXY_API enum nproxy_status nproxy_net_mr_deregister(struct nproxy_net *net, uint32_t id)
{
	enum nproxy_status st = NPROXY_SUCCESS;
	struct net_mr *m;

	if (!net)
		return NPROXY_INVALID;
	pthread_mutex_lock(&net->lock);
	if (id >= net->n_mrs || !net->mrs[id].refs) {
		npx_net_set_err(net, "mr_deregister: no memory region %u", id);
		st = NPROXY_INVALID_HANDLE;
		goto out;
	}
	m = &net->mrs[id];
	if (m->refs == 1 && m->users) {
		npx_net_set_err(net, "mr_deregister: region %u is used by %u started block(s)", id,
			    m->users);
		st = NPROXY_BUSY;
		goto out;
	}
	if (--m->refs == 0 && m->mr) {
		fi_close(&m->mr->fid);
		m->mr = NULL;
	}
out:
	pthread_mutex_unlock(&net->lock);
	return st;
}

/* At close, after the endpoint is gone. */
void npx_net_mr_close_all(struct nproxy_net *net)
{
	for (uint32_t i = 0; i < net->n_mrs; i++) {
		if (net->mrs[i].mr)
			fi_close(&net->mrs[i].mr->fid);
		net->mrs[i].mr = NULL;
		net->mrs[i].refs = 0;
	}
}
