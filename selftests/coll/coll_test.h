/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the selftests/coll/ programs: a rank opened with the
 * defaults every rank test uses (memfd region, shm) and a coll on it,
 * as forked processes; inputs that name their rank, element and op.
 */
#ifndef COLL_TEST_H
#define COLL_TEST_H

#include <nproxy/coll.h>
#include "rank_test.h"

/* One forked rank's pieces. */
struct ct_rank {
	struct nproxy_rank *rank;
	struct nproxy_coll *coll;
};

/* Open rank i of n (job id shared) and a coll on it: 0, or a code to exit with. */
static inline int ct_open(const char *job_id, uint32_t i, uint32_t n, struct ct_rank *r)
{
	struct nproxy_rank_opts o = rt_opts(job_id, i, n);
	enum nproxy_status st;

	st = nproxy_rank_open(&o, &r->rank);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "# rank %u: open: %s: %s\n", i, nproxy_status_str(st),
			nproxy_rank_strerror(NULL));
		return 90;
	}
	st = nproxy_coll_open(r->rank, &r->coll);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "# rank %u: coll open: %s\n", i, nproxy_status_str(st));
		nproxy_rank_close(r->rank);
		return 91;
	}
	return 0;
}

static inline void ct_close(struct ct_rank *r)
{
	nproxy_coll_close(r->coll);
	nproxy_rank_close(r->rank);
}

/* Run a whole op; 0 or a code (the op's status + 40), the reason on stderr. */
static inline int ct_run(struct ct_rank *r, uint32_t i, const struct nproxy_coll_desc *d)
{
	struct nproxy_coll_result res;
	enum nproxy_status st = nproxy_coll_run(r->coll, d, &res);

	if (st == NPROXY_SUCCESS)
		return 0;
	fprintf(stderr, "# rank %u: %s op: %s: %s\n", i,
		nproxy_coll_kind_name((enum nproxy_coll_kind)d->kind), nproxy_status_str(st),
		nproxy_coll_strerror(r->coll));
	return 40 + (int)st;
}

/* A small integer for (rank, element, op): every type holds it exactly. */
static inline int ct_value(uint32_t rank, uint64_t e, uint32_t op)
{
	return (int)((rank * 7 + e * 3 + op) % 5) + 1;
}

/* Element e of buf (of dtype) as a double. */
static inline double ct_get(const void *buf, enum nproxy_dtype t, uint64_t e)
{
	switch (t) {
	case NPROXY_INT8: return ((const int8_t *)buf)[e];
	case NPROXY_UINT8: return ((const uint8_t *)buf)[e];
	case NPROXY_INT32: return ((const int32_t *)buf)[e];
	case NPROXY_UINT32: return ((const uint32_t *)buf)[e];
	case NPROXY_INT64: return (double)((const int64_t *)buf)[e];
	case NPROXY_UINT64: return (double)((const uint64_t *)buf)[e];
	case NPROXY_FLOAT32: return ((const float *)buf)[e];
	case NPROXY_FLOAT64: return ((const double *)buf)[e];
	default: {
		/* half / bfloat16: small integers only, decoded exactly. */
		uint16_t h = ((const uint16_t *)buf)[e];
		uint32_t bits;
		float f;

		if (t == NPROXY_BFLOAT16) {
			bits = (uint32_t)h << 16;
		} else {
			uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;

			bits = ((uint32_t)(h & 0x8000) << 16) |
			       (exp ? ((exp + 112) << 23) | (man << 13) : 0);
		}
		memcpy(&f, &bits, sizeof(f));
		return f;
	}
	}
}

/* Store the small integer v as element e of buf (of dtype). */
static inline void ct_set(void *buf, enum nproxy_dtype t, uint64_t e, int v)
{
	switch (t) {
	case NPROXY_INT8: ((int8_t *)buf)[e] = (int8_t)v; break;
	case NPROXY_UINT8: ((uint8_t *)buf)[e] = (uint8_t)v; break;
	case NPROXY_INT32: ((int32_t *)buf)[e] = v; break;
	case NPROXY_UINT32: ((uint32_t *)buf)[e] = (uint32_t)v; break;
	case NPROXY_INT64: ((int64_t *)buf)[e] = v; break;
	case NPROXY_UINT64: ((uint64_t *)buf)[e] = (uint64_t)v; break;
	case NPROXY_FLOAT32: ((float *)buf)[e] = (float)v; break;
	case NPROXY_FLOAT64: ((double *)buf)[e] = v; break;
	default: {
		float f = (float)v;
		uint32_t bits;

		memcpy(&bits, &f, sizeof(bits));
		if (t == NPROXY_BFLOAT16) {
			((uint16_t *)buf)[e] = (uint16_t)(bits >> 16);
		} else {
			uint32_t exp = ((bits >> 23) & 0xff) - 112;

			((uint16_t *)buf)[e] = (uint16_t)(((bits >> 16) & 0x8000) | (exp << 10) |
							  ((bits >> 13) & 0x3ff));
		}
	}
	}
}

#endif
