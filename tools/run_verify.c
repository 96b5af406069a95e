// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: what each rank sends and the check of what arrived, for the
 * row's collective, type and op (the typed values are run_dtype.c's).
 * Every element depends on (sending rank, element, iteration), so data
 * from the wrong rank, place or iteration cannot pass; buffers that should
 * be overwritten are poisoned first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "run_rank.h"

/* The typed values' kind: the op for an allreduce, else data only moved. */
static int kind(const struct run_rank *rc)
{
	return rc->o->coll == RUN_ALLREDUCE ? (int)rc->row.redop : -1;
}

void run_fill_inputs(struct run_rank *rc, uint64_t iter)
{
	const struct run_row *row = &rc->row;
	size_t n = rc->count, es = rc->esize;
	char *in = rc->send;

	/* Poison the result: stale data cannot pass. */
	memset(rc->recv, 0xA5, rc->recv_len);
	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		if (row->in_place)
			in = (char *)rc->recv + rc->rank * n * es;
		run_dtype_fill(in, row->dtype, -1, rc->rank, rc->world, rc->rank * n, n, iter);
		break;
	case RUN_ALLREDUCE:
		run_dtype_fill(row->in_place ? rc->recv : rc->send, row->dtype, row->redop, rc->rank,
			       rc->world, 0, n, iter);
		break;
	case RUN_SENDRECV:
		run_dtype_fill(rc->send, row->dtype, -1, rc->rank, rc->world, 0, n, iter);
		break;
	}
}

bool run_expect_shared(const struct run_opts *o)
{
	return o->coll != RUN_SENDRECV;
}

void run_expect(const struct run_rank *rc, void *want, void *tmp, uint64_t iter)
{
	size_t n = rc->count, es = rc->esize;
	uint32_t prev = (rc->rank + rc->world - 1) % rc->world;

	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		for (uint32_t r = 0; r < rc->world; r++)
			run_dtype_expect_moved((char *)want + r * n * es, rc->row.dtype, r, r * n, n,
					       iter);
		break;
	case RUN_ALLREDUCE:
		run_dtype_expect_reduce(want, tmp, rc->row.dtype, rc->row.redop, rc->world, n, iter);
		break;
	case RUN_SENDRECV:
		run_dtype_expect_moved(want, rc->row.dtype, prev, 0, n, iter);
		break;
	}
}

/* Whose data element e of the result is (allreduce: whose part of the ring). */
static size_t owner(const struct run_rank *rc, size_t e)
{
	uint64_t per = (rc->count + rc->world - 1) / rc->world;

	if (rc->o->coll == RUN_SENDRECV)
		return (rc->rank + rc->world - 1) % rc->world;
	if (rc->o->coll == RUN_ALLGATHER)
		return e / rc->count;
	return per ? e / per : 0;
}

uint64_t run_verify(const struct run_rank *rc, const void *expected, uint64_t iter, uint64_t size,
		    char *msg, size_t len)
{
	size_t total = rc->recv_len / rc->esize, e, es = rc->esize;
	uint64_t bad, got = 0, want = 0;

	if (!total)
		return 0;
	bad = run_dtype_count_wrong(rc->recv, expected, total, rc->row.dtype, kind(rc));
	if (!bad)
		return 0;
	e = run_dtype_first_wrong(rc->recv, expected, total, rc->row.dtype);
	if (e == total)
		e = 0;
	memcpy(&got, (const char *)rc->recv + e * es, es);
	memcpy(&want, (const char *)expected + e * es, es);
	snprintf(msg, len,
		 "rank %u: %s %" PRIu64 " B iteration %" PRIu64 ": verification error at byte %zu (chunk of rank %zu): got 0x%0*" PRIx64 ", expected 0x%0*" PRIx64 "%s%s%s%s",
		 rc->rank, run_coll_name(rc->o->coll), size, iter, e * es, owner(rc, e),
		 (int)es * 2, got, (int)es * 2, want,
		 rc->o->nccl.on ? " (" : "", rc->o->nccl.on ? nproxy_dtype_name(rc->row.dtype) : "",
		 rc->o->nccl.on ? (rc->row.in_place ? ", in place" : ", out-of-place") : "",
		 rc->o->nccl.on ? ")" : "");
	return bad;
}

/* NPROXY_RUN_CORRUPT: the top byte of an element another rank sent
 * (its sign and exponent for a float: never within a tolerance). */
uint8_t *run_corrupt_byte(struct run_rank *rc)
{
	size_t es = rc->esize, part = rc->o->coll == RUN_ALLGATHER ? rc->count * es : 0;

	if (rc->o->coll == RUN_SENDRECV)
		return (uint8_t *)rc->recv + es - 1;
	return (uint8_t *)rc->recv + ((rc->rank + 1) % rc->world) * part + es - 1;
}
