// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: what each rank sends and the check of what arrived, for the
 * row's collective, type and op (the typed values are run_dtype.c's).
 * Every element depends on (sending rank, element, pattern: the iteration
 * modulo RUN_PATTERNS), so data from the wrong rank, place or the previous
 * iteration cannot pass; buffers that should be overwritten are poisoned
 * first.  Each pattern's input and checked result are kept (rows up to
 * RUN_KEEP_MAX): later iterations copy the input and compare the result
 * with memcmp(), and only a result that differs is checked value by value.
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

static uint64_t pattern_of(uint64_t iter)
{
	return iter % RUN_PATTERNS;
}

void run_fill_inputs(struct run_rank *rc, uint64_t iter)
{
	const struct run_row *row = &rc->row;
	size_t n = rc->count, es = rc->esize;
	uint64_t p = pattern_of(iter);
	char *in = rc->send;

	if (row->in_place && rc->o->coll == RUN_ALLGATHER)
		in = (char *)rc->recv + rc->rank * n * es;
	else if (row->in_place && rc->o->coll == RUN_ALLREDUCE)
		in = rc->recv;
	/* Poison the result: stale data cannot pass. */
	memset(rc->recv, 0xA5, rc->recv_len);
	if (rc->in_valid[p]) {
		memcpy(in, rc->in_kept[p], rc->send_len);
		return;
	}
	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		run_dtype_fill(in, row->dtype, -1, rc->rank, rc->world, rc->rank * n, n, p);
		break;
	case RUN_ALLREDUCE:
		run_dtype_fill(in, row->dtype, row->redop, rc->rank, rc->world, 0, n, p);
		break;
	case RUN_SENDRECV:
		run_dtype_fill(in, row->dtype, -1, rc->rank, rc->world, 0, n, p);
		break;
	}
	if (rc->in_kept[p]) {
		memcpy(rc->in_kept[p], in, rc->send_len);
		rc->in_valid[p] = true;
	}
}

void run_expect(const struct run_rank *rc, void *want, void *tmp, uint64_t iter)
{
	run_dtype_expect_reduce(want, tmp, rc->row.dtype, rc->row.redop, rc->world, rc->count,
				pattern_of(iter));
}

bool run_result_kept(const struct run_rank *rc, uint64_t iter)
{
	uint64_t p = pattern_of(iter);

	return rc->out_valid[p] && !memcmp(rc->recv, rc->out_kept[p], rc->recv_len);
}

void run_keep_result(struct run_rank *rc, uint64_t iter)
{
	uint64_t p = pattern_of(iter);

	if (rc->out_kept[p] && !rc->out_valid[p]) {
		memcpy(rc->out_kept[p], rc->recv, rc->recv_len);
		rc->out_valid[p] = true;
	}
}

/*
 * Moved data (allgather, sendrecv) is checked against its expected values
 * a block at a time: a block stays in the cache, where a whole expected
 * buffer written and read between iterations left the next timed op with
 * cold caches (2 ranks, 4 MiB allgather: 450 -> 600 us).
 */
#define MOVED_BLOCK	2048u	/* elements: 16 KiB at most */

/* Wrong elements of the part of rank r that starts at element base. */
static uint64_t moved_wrong(const struct run_rank *rc, uint32_t r, size_t base, uint64_t iter,
			    size_t *first)
{
	uint64_t blk[MOVED_BLOCK], bad = 0;
	size_t n = rc->count, es = rc->esize;

	for (size_t off = 0; off < n; off += MOVED_BLOCK) {
		size_t m = n - off < MOVED_BLOCK ? n - off : MOVED_BLOCK;
		const char *got = (const char *)rc->recv + (base + off) * es;
		uint64_t b;

		run_dtype_expect_moved(blk, rc->row.dtype, r, base + off, m, iter);
		b = run_dtype_count_wrong(got, blk, m, rc->row.dtype, -1);
		if (b && !bad)
			*first = base + off + run_dtype_first_wrong(got, blk, m, rc->row.dtype);
		bad += b;
	}
	return bad;
}

static uint64_t count_moved_wrong(const struct run_rank *rc, uint64_t iter, size_t *first)
{
	uint64_t bad = 0;

	if (rc->o->coll == RUN_SENDRECV)
		return moved_wrong(rc, (rc->rank + rc->world - 1) % rc->world, 0, iter, first);
	for (uint32_t r = 0; r < rc->world; r++)
		bad += moved_wrong(rc, r, (size_t)r * rc->count, iter, bad ? &(size_t){ 0 } : first);
	return bad;
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
	if (rc->o->coll == RUN_ALLREDUCE) {
		bad = run_dtype_count_wrong(rc->recv, expected, total, rc->row.dtype, kind(rc));
		e = bad ? run_dtype_first_wrong(rc->recv, expected, total, rc->row.dtype) : 0;
	} else {
		e = 0;
		bad = count_moved_wrong(rc, pattern_of(iter), &e);
	}
	if (!bad)
		return 0;
	if (e >= total)
		e = 0;
	memcpy(&got, (const char *)rc->recv + e * es, es);
	if (rc->o->coll == RUN_ALLREDUCE)
		memcpy(&want, (const char *)expected + e * es, es);
	else
		run_dtype_expect_moved(&want, rc->row.dtype, (uint32_t)owner(rc, e), e, 1,
				       pattern_of(iter));
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
