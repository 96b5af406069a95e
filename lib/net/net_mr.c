// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Memory registration cache: one libfabric MR per registered buffer, shared
 * by every block that references it (ops carry (mr id, offset) pairs), so
 * the hot path never registers.
 *
 * The modes EFA asks for, wherever a provider reports them:
 *   FI_MR_LOCAL      every buffer is registered and its descriptor goes with
 *                    every send and recv (net_engine.c, net_barrier.c,
 *                    net_abort.c); without it no MR is made and the entry
 *                    only validates bounds.
 *   FI_MR_ALLOCATED  physical pages must back every registered address: a
 *                    range with an unmapped page is refused here, before
 *                    the provider sees it.
 *   FI_MR_PROV_KEY   the provider chooses the key; without it the key the
 *                    engine requests must be unique in the domain, so every
 *                    registration requests a new one.
 *   FI_MR_VIRT_ADDR  how RMA addresses a region; the engine posts only
 *                    tagged sends and recvs, so no remote address exists.
 *   FI_MR_ENDPOINT   the MR is bound to the endpoint and enabled.
 * NPROXY_NET_MR_MODE ("local", "allocated", "efa" for both, comma
 * separated) adds modes the provider does not require -- fi_mr(3) allows
 * registering and passing descriptors anyway -- so EFA's registration path
 * runs on shm, tcp;ofi_rxm and udp;ofi_rxd too.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <nproxy/log.h>
#include "net_internal.h"

#define MR_MODE_ENV	"NPROXY_NET_MR_MODE"

/* One token of NPROXY_NET_MR_MODE: its FI_MR_* bits, 0 if unknown. */
static uint64_t forced_mode_bits(const char *tok, size_t len)
{
	static const struct {
		const char *name;
		uint64_t bits;
	} names[] = {
		{ "local", FI_MR_LOCAL },
		{ "allocated", FI_MR_ALLOCATED },
		{ "efa", FI_MR_LOCAL | FI_MR_ALLOCATED },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == len && !strncasecmp(tok, names[i].name, len))
			return names[i].bits;
	return 0;
}

enum nproxy_status npx_net_mr_mode_init(struct nproxy_net *net)
{
	const char *text, *p;
	char mode_text[256];

	net->mr_mode = net->info->domain_attr->mr_mode;
	net->next_mr_key = 1;
	npx_env_str(MR_MODE_ENV, NULL, &text);
	for (p = text; p && *p;) {
		size_t len = strcspn(p, ",| ");
		uint64_t bits = forced_mode_bits(p, len);

		if (len && !bits) {
			/* virt_addr, prov_key and endpoint describe the provider's
			 * own addressing and keys: only it can set them. */
			npx_net_set_err(net, "%s: unknown mode '%.*s' (local, allocated or efa)",
					MR_MODE_ENV, (int)len, p);
			return NPROXY_INVALID;
		}
		net->mr_mode |= bits;
		p += len;
		p += strspn(p, ",| ");
	}
	/* fi_tostr_r: fi_tostr() writes one buffer of the whole process, and
	 * the ranks of a process open their engines at once. */
	nproxy_log(NPROXY_LOG_INFO, "net rank %u: provider %s, mr_mode %s", net->rank, net->prov,
		   fi_tostr_r(mode_text, sizeof(mode_text), &net->mr_mode, FI_TYPE_MR_MODE));
	return NPROXY_SUCCESS;
}

/* FI_MR_ALLOCATED: is every page of [buf, buf + len) mapped?  mincore()
 * fails with ENOMEM on a range with an unmapped page. */
static bool range_allocated(const void *buf, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)buf & ~(page - 1);
	uintptr_t end = (uintptr_t)buf + len;
	unsigned char vec[256];

	if (end < (uintptr_t)buf)
		return false;
	while (start < end) {
		size_t span = end - start < 256 * page ? end - start : 256 * page;

		if (mincore((void *)start, span, vec) && errno == ENOMEM)
			return false;
		start += span;
	}
	return true;
}

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
	if ((net->mr_mode & FI_MR_ALLOCATED) && !range_allocated(buf, len)) {
		npx_net_set_err(net, "mr_register: %zu bytes at %p are not all allocated memory (provider %s, FI_MR_ALLOCATED: every registered page must be mapped)",
				len, buf, net->prov);
		return NPROXY_INVALID;
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
	if (net->mr_mode & FI_MR_LOCAL) {
		/* The requested key: ignored under FI_MR_PROV_KEY, else it must
		 * differ from every other region's in the domain. */
		rc = fi_mr_reg(net->domain, buf, len, FI_SEND | FI_RECV, 0, net->next_mr_key++, 0,
			       &m->mr, NULL);
		if (!rc && (net->mr_mode & FI_MR_ENDPOINT)) {
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
		m->key = fi_mr_key(m->mr);
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
