// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: what each rank sends and the check of what arrived.  Every
 * word is a hash of (sending rank, element, iteration), so data from the
 * wrong rank, place or iteration cannot pass; buffers that should be
 * overwritten are poisoned first.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "run_rank.h"

static uint32_t pattern(uint32_t rank, size_t elem, uint64_t iter)
{
	uint32_t x = 0x9E3779B9u * (rank + 1) ^ (uint32_t)elem * 0x85EBCA6Bu ^
		     ((uint32_t)iter * 0xC2B2AE35u + 0x27D4EB2Fu);

	return x ^ (x >> 15);
}

void run_fill_inputs(struct run_rank *rc, uint64_t iter)
{
	size_t n = rc->chunk / 4;

	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		/* Poison every chunk, then write our own: stale data cannot pass. */
		memset(rc->data, 0xA5, rc->data_len);
		for (size_t e = 0; e < n; e++)
			rc->data[rc->rank * n + e] = pattern(rc->rank, rc->rank * n + e, iter);
		break;
	case RUN_ALLREDUCE:
		for (size_t e = 0; e < n * rc->world; e++)
			rc->data[e] = pattern(rc->rank, e, iter);
		memset(rc->scratch, 0xA5, rc->scratch_len);
		break;
	case RUN_SENDRECV:
		for (size_t e = 0; e < n; e++)
			rc->data[e] = pattern(rc->rank, e, iter);
		memset(rc->scratch, 0xA5, rc->scratch_len);
		break;
	}
}

/* The word element e of the result should hold (iteration iter). */
static uint32_t expected_word(const struct run_rank *rc, size_t e, size_t n, uint64_t iter)
{
	uint32_t want = 0;

	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		return pattern((uint32_t)(e / n), e, iter);
	case RUN_ALLREDUCE:
		for (uint32_t r = 0; r < rc->world; r++)
			want += pattern(r, e, iter);
		return want;
	default:
		return pattern((rc->rank + rc->world - 1) % rc->world, e, iter);
	}
}

/*
 * Wrong words in [lo, hi) whose expected value pattern(r, e, iter) comes
 * from one rank r: a branch-free loop the compiler vectorizes (checking is
 * outside the timing, but on an oversubscribed host a rank that checks
 * takes cpu from the ranks still transferring).
 */
static uint64_t count_wrong(const uint32_t *got, uint32_t r, size_t lo, size_t hi, uint64_t iter)
{
	uint64_t bad = 0;

	for (size_t e = lo; e < hi; e++)
		bad += got[e] != pattern(r, e, iter);
	return bad;
}

uint64_t run_verify(const struct run_rank *rc, uint64_t iter, uint64_t size, char *msg,
		    size_t len)
{
	size_t n = rc->chunk / 4, total;
	const uint32_t *got;
	uint64_t bad = 0;
	uint32_t prev = (rc->rank + rc->world - 1) % rc->world;

	got = rc->o->coll == RUN_SENDRECV ? rc->scratch : rc->data;
	total = rc->o->coll == RUN_SENDRECV ? n : n * rc->world;
	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		for (uint32_t r = 0; r < rc->world; r++)
			bad += count_wrong(got, r, r * n, (r + 1) * n, iter);
		break;
	case RUN_ALLREDUCE:
		for (size_t e = 0; e < total; e++) {
			uint32_t want = 0;

			for (uint32_t r = 0; r < rc->world; r++)
				want += pattern(r, e, iter);
			bad += got[e] != want;
		}
		break;
	default:
		bad = count_wrong(got, prev, 0, n, iter);
	}
	if (!bad)
		return 0;
	for (size_t e = 0; e < total; e++) {
		uint32_t want = expected_word(rc, e, n, iter);

		if (got[e] == want)
			continue;
		snprintf(msg, len,
			 "rank %u: %s %" PRIu64 " B iteration %" PRIu64 ": verification error at byte %zu (chunk of rank %zu): got 0x%08x, expected 0x%08x",
			 rc->rank, run_coll_name(rc->o->coll), size, iter, e * 4,
			 rc->o->coll == RUN_SENDRECV ? (size_t)prev : e / n, got[e], want);
		break;
	}
	return bad;
}
