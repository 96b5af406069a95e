// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The coll's buffer registrations: a caller hands plain pointers, the
 * engine needs registered regions.  The last NPROXY_COLL_MR_CACHE buffers
 * stay registered, so a loop over the same buffers registers once; a
 * registration that covers the range is reused, the least recently used
 * one makes room.
 */
#include <nproxy/net.h>
#include "coll_internal.h"

static bool covers(const struct coll_mr *m, const void *base, size_t len)
{
	const char *b = m->base, *p = base;

	return m->used && p >= b && (size_t)(p - b) <= m->len && len <= m->len - (size_t)(p - b);
}

enum nproxy_status npx_coll_mr(struct nproxy_coll *coll, const void *base, size_t len,
			       struct nproxy_net_addr *where)
{
	struct coll_mr *victim = &coll->mrs[0];
	enum nproxy_status st;
	uint32_t new_id;

	for (int i = 0; i < NPROXY_COLL_MR_CACHE; i++) {
		struct coll_mr *m = &coll->mrs[i];

		if (covers(m, base, len)) {
			m->used = ++coll->mr_clock;
			/* A registration that covers it need not start there. */
			*where = (struct nproxy_net_addr){ .mr = m->id,
				.offset = (uint64_t)((const char *)base - (const char *)m->base) };
			return NPROXY_SUCCESS;
		}
		if (m->used < victim->used)
			victim = m;
	}
	st = nproxy_net_mr_register(coll->net, (void *)base, len ? len : 1, &new_id);
	if (st != NPROXY_SUCCESS)
		return npx_coll_fail(coll, st, "registering %zu bytes at %p: %s", len, base,
				     nproxy_net_strerror(coll->net));
	if (victim->used)
		nproxy_net_mr_deregister(coll->net, victim->id);
	*victim = (struct coll_mr){ .base = base, .len = len ? len : 1, .id = new_id,
				    .used = ++coll->mr_clock };
	*where = (struct nproxy_net_addr){ .mr = new_id };
	return NPROXY_SUCCESS;
}

void npx_coll_mr_drop_all(struct nproxy_coll *coll)
{
	for (int i = 0; i < NPROXY_COLL_MR_CACHE; i++) {
		if (coll->mrs[i].used)
			nproxy_net_mr_deregister(coll->net, coll->mrs[i].id);
		coll->mrs[i].used = 0;
	}
}

void nproxy_coll_forget(struct nproxy_coll *coll, const void *buf, size_t len)
{
	const char *lo = buf, *hi = lo + len;

	if (!coll)
		return;
	for (int i = 0; i < NPROXY_COLL_MR_CACHE; i++) {
		struct coll_mr *m = &coll->mrs[i];
		const char *b = m->base;

		if (!m->used || b >= hi || b + m->len <= lo)
			continue;
		nproxy_net_mr_deregister(coll->net, m->id);
		m->used = 0;
	}
}
