// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: each size's buffers.  data holds the whole result (the
 * allgather's W chunks, the allreduce's vector, sendrecv's one chunk);
 * scratch receives what is added or checked on the host (allreduce's
 * partial chunk, sendrecv's incoming chunk).  The op verb registers them
 * on first use and forgets them before they are freed.
 */
#include <stdlib.h>
#include <string.h>
#include "run_rank.h"

int run_buffers_alloc(struct run_rank *rc, uint64_t size)
{
	const struct run_opts *o = rc->o;
	size_t chunk, data_len, scratch_len;

	if (o->coll == RUN_SENDRECV) {
		chunk = size / 4 * 4;
		data_len = scratch_len = chunk;
	} else {
		chunk = size / rc->world / 4 * 4;
		data_len = chunk * rc->world;
		scratch_len = o->coll == RUN_ALLREDUCE ? chunk : 0;
	}
	if (!chunk)
		chunk = 4, data_len = o->coll == RUN_SENDRECV ? 4 : 4 * rc->world,
		scratch_len = o->coll == RUN_ALLGATHER ? 0 : 4;
	rc->chunk = chunk;
	rc->data_len = data_len;
	rc->scratch_len = scratch_len;
	if (posix_memalign((void **)&rc->data, 4096, data_len) ||
	    (scratch_len && posix_memalign((void **)&rc->scratch, 4096, scratch_len)))
		return run_fail(RUN_EXIT_FAILURE, "rank %u: out of memory for %zu-byte buffers",
				rc->rank, data_len);
	memset(rc->data, 0, data_len);
	if (scratch_len)
		memset(rc->scratch, 0, scratch_len);
	return RUN_EXIT_OK;
}

void run_buffers_free(struct run_rank *rc)
{
	/* A later size's buffer may come back at the same address. */
	if (rc->data)
		nproxy_coll_forget(rc->coll, rc->data, rc->data_len);
	if (rc->scratch)
		nproxy_coll_forget(rc->coll, rc->scratch, rc->scratch_len);
	free(rc->data);
	free(rc->scratch);
	rc->data = rc->scratch = NULL;
}
