/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Bananaphone: the host bootstrap bus for local ranks (one host).
 *
 * A memfd segment (one single-producer ring per local rank + a control
 * block), handed from the local leader to followers over an abstract Unix
 * socket with SCM_RIGHTS; readers sleep on futexes; every participant holds
 * a pidfd of every peer, so a dead peer turns pending calls into
 * NPROXY_PEER_DEAD (naming rank and pid) instead of a hang.  Used for the
 * local-leader rendezvous (all-gather, barrier, bcast) before any proxy
 * task exists.  Nothing is ever left in the filesystem.
 *
 * Every blocking call takes a deadline in milliseconds (relative, > 0).
 */
#ifndef NPROXY_BANANAPHONE_H
#define NPROXY_BANANAPHONE_H

#include <stddef.h>
#include <stdint.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_MAX_RANKS	64
#define BP_MAX_JOB_ID	64	/* bytes, without the NUL */

struct bp;

/* Local leader (local rank 0): create the segment and listen for followers. */
NPROXY_API enum nproxy_status bp_create(const char *job_id, uint32_t n_ranks,
					struct bp **out);
/*
 * Connect as local rank `rank` (1..n_ranks-1), retrying until the leader
 * appears or timeout_ms passes.  All participants return from create/connect
 * immediately; the first collective waits for everyone to arrive.
 */
NPROXY_API enum nproxy_status bp_connect(const char *job_id, uint32_t rank,
					 uint32_t n_ranks, int timeout_ms,
					 struct bp **out);

NPROXY_API uint32_t bp_rank(const struct bp *bp);
NPROXY_API uint32_t bp_size(const struct bp *bp);

/*
 * All-gather variable-size blobs: rank r contributes (data, len); on success
 * *out_bufs is one malloc'd block holding every rank's blob back to back,
 * out_lens[r]/out_offs[r] (caller arrays of bp_size() entries) locate each.
 */
NPROXY_API enum nproxy_status bp_allgather(struct bp *bp, const void *data, size_t len,
					   void **out_bufs, size_t *out_lens,
					   size_t *out_offs, int timeout_ms);
NPROXY_API enum nproxy_status bp_barrier(struct bp *bp, int timeout_ms);
/* The leader's (data, len) reaches everyone; *out is malloc'd on every rank. */
NPROXY_API enum nproxy_status bp_bcast(struct bp *bp, const void *data, size_t len,
				       void **out, size_t *out_len, int timeout_ms);

/* Non-blocking barrier pieces, for the proxy worker's barrier task. */
NPROXY_API enum nproxy_status bp_barrier_arrive(struct bp *bp, uint64_t seq);
NPROXY_API enum nproxy_status bp_barrier_test(struct bp *bp, uint64_t seq, int *done);

/* Last error text (names the rank/pid/job involved); valid until the next call. */
NPROXY_API const char *bp_strerror(const struct bp *bp);

/* Leave in an orderly way: peers see NPROXY_PEER_LEFT, not a death. */
NPROXY_API void bp_hangup(struct bp *bp);
/* Unmap, close, free.  Safe after hangup or instead of it. */
NPROXY_API void bp_cleanup(struct bp *bp);

#ifdef __cplusplus
}
#endif
#endif
